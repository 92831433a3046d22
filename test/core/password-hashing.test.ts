import t from 'tap';
import { ApiError } from '../../core/kernel/errors.ts';
import { type DeriveKey, PasswordHasher } from '../../core/identity/passwords.ts';
import { Tokens } from '../../core/kernel/di-tokens.ts';
import { buildTestApp } from '../helpers/app.ts';
import { fastDeriveKey, invite, onEachBackend, PASSWORD, personAt, signIn, signInFrom } from '../helpers/people.ts';

// Several apps, each on both backends: on this project's loaded 2-core machine that can pass the default 120 s.
t.setTimeout(300_000);

/**
 * A key derivation that holds every call until the test releases it, so how many run at once is
 * an observed count rather than a matter of timing.
 */
function heldDerivation() {
  const state = { running: 0, mostAtOnce: 0, started: 0 };
  const held: Array<() => void> = [];
  const onStart: Array<() => void> = [];
  const derive: DeriveKey = async (password, salt, cost) => {
    state.running += 1;
    state.started += 1;
    state.mostAtOnce = Math.max(state.mostAtOnce, state.running);
    for (const wake of onStart.splice(0)) wake();
    await new Promise<void>((resolve) => held.push(resolve));
    state.running -= 1;
    return fastDeriveKey(password, salt, cost);
  };
  return {
    derive,
    state,
    /** Resolves once `count` derivations have started in all. */
    async started(count: number): Promise<void> {
      while (state.started < count) await new Promise<void>((resolve) => onStart.push(resolve));
    },
    releaseOne(): void {
      const release = held.shift();
      if (!release) throw new Error('no derivation is running');
      release();
    },
  };
}

t.test('a burst of sign-ins never runs more password hashes at once than the bound', async (t) => {
  const hashing = heldDerivation();
  const hasher = new PasswordHasher({ concurrency: 2, maxWaiting: 64, derive: hashing.derive });
  const stored = await (async () => {
    const made = hasher.hash(PASSWORD);
    await hashing.started(1);
    hashing.releaseOne();
    return made;
  })();
  // What eight sign-ins arriving together ask of the hasher: right and wrong passwords alike.
  const burst = Array.from({ length: 8 }, (_, i) => hasher.verify(i % 2 ? PASSWORD : 'a wrong password here', stored));
  await hashing.started(3);
  t.equal(hashing.state.running, 2, 'two run, six wait');
  // Each release frees one slot, which the next waiting verification takes at once.
  for (let released = 0; released < 8; released++) {
    await hashing.started(1 + Math.min(8, released + 2));
    t.ok(hashing.state.running <= 2);
    hashing.releaseOne();
  }
  t.same(await Promise.all(burst), [false, true, false, true, false, true, false, true]);
  t.equal(hashing.state.mostAtOnce, 2, 'never more than the bound at once');
});

t.test('sign-in takes its hashing slots from the bound in auth.passwordHashConcurrency', async (t) => {
  const hashing = heldDerivation();
  const test = await buildTestApp(t, { config: { auth: { passwordHashConcurrency: 1, passwordHashMaxWaiting: 0 } }, deriveKey: hashing.derive });
  const first = signIn(test, 'nobody@example.com', 'a wrong password here');
  await hashing.started(1);
  const second = await signIn(test, 'nobody@example.com', 'another wrong password');
  t.equal(second.statusCode, 503, second.body);
  t.equal(second.json().error.code, 'password_hashing_busy');
  t.equal(second.headers['retry-after'], '1');
  hashing.releaseOne();
  t.equal((await first).statusCode, 401);
});

t.test('past the waiting line a hash is refused with 503 password_hashing_busy and retry-after', async (t) => {
  const hashing = heldDerivation();
  const hasher = new PasswordHasher({ concurrency: 1, maxWaiting: 1, derive: hashing.derive });
  const running = hasher.hash('first password here');
  const waiting = hasher.hash('second password here');
  const refused = await hasher.hash('third password here').catch((error: unknown) => error);
  t.ok(refused instanceof ApiError);
  t.equal((refused as ApiError).code, 'password_hashing_busy');
  t.equal((refused as ApiError).status, 503);
  t.equal((refused as ApiError).headers['retry-after'], '1');
  await hashing.started(1);
  hashing.releaseOne();
  await hashing.started(2);
  hashing.releaseOne();
  t.match(await running, /^scrypt\$/);
  t.match(await waiting, /^scrypt\$/);
  t.equal(hashing.state.mostAtOnce, 1);
});

t.test('new hashes use scrypt N=2^15, r=8, p=3, and a p=1 hash still verifies with its own parameters', async (t) => {
  const hasher = new PasswordHasher({ concurrency: 2, maxWaiting: 0 });
  const current = await hasher.hash(PASSWORD);
  t.match(current, /^scrypt\$N=32768,r=8,p=3\$[A-Za-z0-9_-]{22}\$[A-Za-z0-9_-]{43}$/);
  t.equal(await hasher.verify(PASSWORD, current), true);
  t.equal(hasher.isOutdated(current), false);
  const older = await new PasswordHasher({ concurrency: 1, maxWaiting: 0, cost: { N: 2 ** 15, r: 8, p: 1 } }).hash(PASSWORD);
  t.equal(await hasher.verify(PASSWORD, older), true);
  t.equal(await hasher.verify('not the password', older), false);
  t.equal(hasher.isOutdated(older), true);
});

t.test('no password matches the hash unknown emails are checked against', async (t) => {
  const hasher = new PasswordHasher({ concurrency: 1, maxWaiting: 0, derive: fastDeriveKey });
  const unmatchable = hasher.unmatchableHash();
  t.match(unmatchable, /^scrypt\$N=32768,r=8,p=3\$/, 'today’s parameters, so it costs what a real verification does');
  t.equal(await hasher.verify('', unmatchable), false);
  t.equal(await hasher.verify(PASSWORD, unmatchable), false);
});

t.test('set-password holds no database transaction while its hash waits or runs', async (t) => {
  const hashing = heldDerivation();
  const test = await buildTestApp(t, { deriveKey: hashing.derive });
  const token = await invite(test, 'patient@example.com');
  const setting = test.call('POST', '/client/auth/set-password', { token: null, body: { token, password: PASSWORD } });
  await hashing.started(1);
  // On PGlite a transaction holds the only session: this query would wait for the hash to finish.
  const { rows } = await test.app.svc.container.resolve(Tokens.Database).query<{ one: number }>('SELECT 1 AS one');
  t.same(rows, [{ one: 1 }], 'the database answers while the hash is held');
  hashing.releaseOne();
  t.equal((await setting).statusCode, 200);
});

onEachBackend(t, 'a password hash made with older parameters is verified with them and upgraded at the next sign-in', async (t, config) => {
  const test = await buildTestApp(t, { config, deriveKey: fastDeriveKey });
  await personAt(test, '10.0.0.1', 'old@example.com');
  const identity = test.app.svc.container.resolve(Tokens.Identity);
  const person = (await identity.people.getByEmail('old@example.com'))!;
  const before = new PasswordHasher({ concurrency: 1, maxWaiting: 0, cost: { N: 2 ** 15, r: 8, p: 1 }, derive: fastDeriveKey });
  const oldHash = await before.hash(PASSWORD);
  await identity.people.setPasswordHash(person.id, oldHash);

  t.equal((await signInFrom(test, '10.0.0.1', 'old@example.com', 'not the password at all')).statusCode, 401);
  t.equal(await identity.people.passwordHashOf(person.id), oldHash, 'a wrong password changes nothing');
  const signedIn = await signInFrom(test, '10.0.0.1', 'old@example.com');
  t.equal(signedIn.statusCode, 200, signedIn.body);
  const upgraded = await identity.people.passwordHashOf(person.id);
  t.match(upgraded, /^scrypt\$N=32768,r=8,p=3\$[A-Za-z0-9_-]{22}\$[A-Za-z0-9_-]{43}$/);
  t.equal((await signInFrom(test, '10.0.0.1', 'old@example.com')).statusCode, 200, 'the upgraded hash verifies the same password');
});
