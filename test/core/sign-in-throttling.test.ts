import t, { type Test } from 'tap';
import type { AppConfigInput } from '../../config/schema.ts';
import { buildTestApp } from '../helpers/app.ts';
import { fastDeriveKey, onEachBackend as onEach, personAt, signInFrom } from '../helpers/people.ts';

// Several apps, each on both backends: on this project's loaded 2-core machine that can pass the default 120 s.
t.setTimeout(300_000);

/** Hashing is not the subject here: a fast stand-in keeps a hundred attempts quick (password-hashing.test.ts has scrypt). */
const build = (t: Test, config: AppConfigInput) => buildTestApp(t, { config, deriveKey: fastDeriveKey });
const onEachBackend = (name: string, run: (t: Test, config: AppConfigInput) => Promise<void>) => onEach(t, name, run);

onEachBackend("a stranger's hundred wrong passwords do not stop the person signing in from their own address", async (t, config) => {
  const test = await build(t, config);
  await personAt(test, '10.0.0.1', 'victim@example.com');
  const statuses: number[] = [];
  for (let i = 0; i < 100; i++) statuses.push((await signInFrom(test, '203.0.113.9', 'victim@example.com', `guess number ${i} wrong`)).statusCode);
  t.same(statuses.slice(0, 10), Array(10).fill(401), 'the stranger gets ten tries at this email from their address');
  t.same(statuses.slice(10), Array(90).fill(429), 'then the stranger is throttled');
  const own = await signInFrom(test, '10.0.0.1', 'victim@example.com');
  t.equal(own.statusCode, 200, own.body);
});

onEachBackend('guesses spread over many addresses are capped per email, but not at the addresses the person signed in from', async (t, config) => {
  const test = await build(t, { ...config, auth: { signInAttemptsPerEmail: 5 } });
  await personAt(test, '10.0.0.1', 'spread@example.com');
  const statuses: number[] = [];
  for (let i = 1; i <= 6; i++) statuses.push((await signInFrom(test, `198.51.100.${i}`, 'spread@example.com', 'a wrong guess here')).statusCode);
  // The person's own first sign-in, from an address new then, took one of the five.
  t.same(statuses, [401, 401, 401, 401, 429, 429], 'four more from new addresses, then the email is closed to new addresses');
  const elsewhere = await signInFrom(test, '10.0.0.2', 'spread@example.com');
  t.equal(elsewhere.statusCode, 429, 'an address the person never used is throttled like any other');
  t.equal(elsewhere.json().error.code, 'too_many_sign_in_attempts');
  t.match(elsewhere.headers['retry-after'], /^\d+$/);
  const own = await signInFrom(test, '10.0.0.1', 'spread@example.com');
  t.equal(own.statusCode, 200, own.body);
  const afterwards = await signInFrom(test, '10.0.0.2', 'spread@example.com');
  t.equal(afterwards.statusCode, 200, "the person's own sign-in refilled the email's allowance");
});

onEachBackend('a stranger who picks a new IPv6 address in their /64 for each guess is throttled all the same', async (t, config) => {
  const test = await build(t, config);
  await personAt(test, '10.0.0.1', 'rotated@example.com');
  const statuses: number[] = [];
  for (let i = 1; i <= 11; i++) statuses.push((await signInFrom(test, `2001:db8:1:2::${i.toString(16)}`, 'rotated@example.com', 'a wrong guess')).statusCode);
  t.same(statuses, [...Array(10).fill(401), 429]);
  t.equal((await signInFrom(test, '10.0.0.1', 'rotated@example.com')).statusCode, 200);
});

onEachBackend('sign-in attempts from one address are limited across emails', async (t, config) => {
  const test = await build(t, { ...config, auth: { signInAttemptsPerIp: 3 } });
  const statuses: number[] = [];
  for (let i = 0; i < 4; i++) statuses.push((await signInFrom(test, '192.0.2.7', `sprayed${i}@example.com`, 'a common password')).statusCode);
  t.same(statuses, [401, 401, 401, 429]);
});
