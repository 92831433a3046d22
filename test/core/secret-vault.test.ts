import { inspect } from 'node:util';
import t, { type Test } from 'tap';
import { coreMigrations } from '../../adapters/sql/core-migrations.ts';
import { runMigrations } from '../../adapters/sql/migrator.ts';
import { SqlSecretStore } from '../../adapters/sql/secret-store.ts';
import type { Database, Queryable } from '../../core/ports/database.ts';
import type { SecretStore } from '../../core/ports/secrets.ts';
import { generateKeyEntry, SecretKeyring } from '../../core/services/secret-keys.ts';
import { SecretValue, SecretVault, SecretVaultError } from '../../core/services/secret-vault.ts';
import { databaseBackends } from '../helpers/databases.ts';

const keyA = generateKeyEntry(new Date('2026-01-01'));
const keyB = generateKeyEntry(new Date('2026-06-01'));
const keyC = generateKeyEntry(new Date('2026-09-01'));
const idOf = (entry: string) => entry.split(':')[0]!;
const sqlStore = (db: Queryable) => new SqlSecretStore(db);

function vaultWith(db: Database, ...keys: string[]): SecretVault {
  return new SecretVault(sqlStore, db, SecretKeyring.fromEntries(keys));
}

async function rejectsWith(t: Test, promise: Promise<unknown>, reason: string, message = reason) {
  const error = await promise.then(
    () => null,
    (e: unknown) => e,
  );
  t.type(error, SecretVaultError, message);
  t.equal((error as SecretVaultError).reason, reason, message);
}

async function vaultContract(t: Test, db: Database) {
  await runMigrations(db, coreMigrations);
  const vault = vaultWith(db, keyA);
  const hook = { kind: 'webhook', id: 'wh_1' };

  t.test('a value is read back as a SecretValue that never prints itself', async (t) => {
    const ref = await vault.put(hook, 'signing_secret', 'whsec_plaintext-1');
    t.same(ref, { owner: hook, name: 'signing_secret', version: 1 });
    const got = await vault.get(hook, 'signing_secret');
    t.equal(got!.value.reveal(), 'whsec_plaintext-1');
    t.same(got!.ref, ref);
    const value = got!.value;
    for (const shown of [JSON.stringify({ value }), String(value), `${value}`, inspect({ value }), inspect(value)]) {
      t.notMatch(shown, /plaintext/, shown);
      t.match(shown, /\[secret\]/);
    }
    t.equal(await vault.get(hook, 'nothing'), null);
  });

  t.test('list names an owner’s secrets and versions, never their values', async (t) => {
    const app = { kind: 'app', id: 'app_1' };
    await vault.put(app, 'DATABASE_URL', 'postgres://u:p@h/db');
    await vault.put(app, 'API_TOKEN', 'tok-123');
    const listed = await vault.list(app);
    t.same(
      listed.map((s) => [s.name, s.version]),
      [
        ['API_TOKEN', 1],
        ['DATABASE_URL', 1],
      ],
    );
    t.notMatch(JSON.stringify(listed), /tok-123|u:p@h/);
    t.same(await vault.list({ kind: 'app', id: 'app_2' }), []);
  });

  t.test('a put replaces the value and bumps the version; expectedVersion makes it a compare-and-swap', async (t) => {
    const upstream = { kind: 'mcp-upstream', id: 'up_1' };
    t.same(await vault.put(upstream, 'refresh_token', 'r1', { expectedVersion: 0 }), { owner: upstream, name: 'refresh_token', version: 1 });
    t.equal(await vault.put(upstream, 'refresh_token', 'r-other', { expectedVersion: 0 }), null, 'create-only refuses an existing secret');
    t.equal((await vault.put(upstream, 'refresh_token', 'r2', { expectedVersion: 1 }))?.version, 2);
    t.equal(await vault.put(upstream, 'refresh_token', 'r-stale', { expectedVersion: 1 }), null, 'a stale version loses');
    t.equal((await vault.get(upstream, 'refresh_token'))!.value.reveal(), 'r2');
    t.equal((await vault.put(upstream, 'refresh_token', 'r3'))?.version, 3, 'without expectedVersion it always writes');
  });

  t.test('delete removes a secret once', async (t) => {
    await vault.put(hook, 'old', 'x');
    t.equal(await vault.delete(hook, 'old'), true);
    t.equal(await vault.delete(hook, 'old'), false);
    t.equal(await vault.get(hook, 'old'), null);
  });

  t.test('deleteOwners forgets every secret of the owners named, and only theirs', async (t) => {
    const gone = [
      { kind: 'webhook', id: 'wh_gone_1' },
      { kind: 'webhook', id: 'wh_gone_2' },
    ];
    const kept = { kind: 'webhook', id: 'wh_kept' };
    const sameIdOtherKind = { kind: 'app', id: 'wh_gone_1' };
    for (const owner of gone) {
      await vault.put(owner, 'signing_secret', 'a');
      await vault.put(owner, 'previous_signing_secret', 'b');
    }
    await vault.put(kept, 'signing_secret', 'c');
    await vault.put(sameIdOtherKind, 'signing_secret', 'd');
    t.equal(await vault.deleteOwners('webhook', ['wh_gone_1', 'wh_gone_2']), 4);
    for (const owner of gone) t.same(await vault.list(owner), []);
    t.equal((await vault.get(kept, 'signing_secret'))!.value.reveal(), 'c', 'another owner of the kind keeps its secret');
    t.equal((await vault.get(sameIdOtherKind, 'signing_secret'))!.value.reveal(), 'd', 'an owner of another kind with the same id too');
    t.equal(await vault.deleteOwners('webhook', []), 0, 'no owners: nothing');
  });

  t.test('a ciphertext copied into another owner’s row fails to open', async (t) => {
    await vault.put({ kind: 'webhook', id: 'wh_victim' }, 'signing_secret', 'victim-secret');
    await vault.put({ kind: 'webhook', id: 'wh_attacker' }, 'signing_secret', 'attacker-secret');
    await db.query(
      `UPDATE secrets SET (key_id, nonce, ciphertext, auth_tag) = (SELECT key_id, nonce, ciphertext, auth_tag FROM secrets WHERE owner_id = 'wh_victim')
       WHERE owner_id = 'wh_attacker'`,
    );
    await rejectsWith(t, vault.get({ kind: 'webhook', id: 'wh_attacker' }, 'signing_secret'), 'undecryptable');
    t.equal((await vault.get({ kind: 'webhook', id: 'wh_victim' }, 'signing_secret'))!.value.reveal(), 'victim-secret');
  });

  t.test('a ciphertext moved to another name of the same owner fails to open', async (t) => {
    await vault.put(hook, 'a', 'value-a');
    await vault.put(hook, 'b', 'value-b');
    await db.query(
      `UPDATE secrets SET (nonce, ciphertext, auth_tag) = (SELECT nonce, ciphertext, auth_tag FROM secrets WHERE owner_id = 'wh_1' AND name = 'a') WHERE owner_id = 'wh_1' AND name = 'b'`,
    );
    await rejectsWith(t, vault.get(hook, 'b'), 'undecryptable');
  });

  t.test('a changed byte of the ciphertext, nonce or tag fails to open', async (t) => {
    for (const column of ['ciphertext', 'nonce', 'auth_tag']) {
      const owner = { kind: 'tamper', id: column };
      await vault.put(owner, 'v', 'untouched-value');
      await db.query(`UPDATE secrets SET ${column} = set_byte(${column}, 0, get_byte(${column}, 0) # 1) WHERE owner_kind = 'tamper' AND owner_id = $1`, [column]);
      await rejectsWith(t, vault.get(owner, 'v'), 'undecryptable', column);
    }
  });

  t.test('after a rotation every value reads back, also once the old key is removed', async (t) => {
    const owners = Array.from({ length: 7 }, (_, i) => ({ kind: 'rotation', id: `r${i}` }));
    for (const owner of owners) await vault.put(owner, 'token', `value-of-${owner.id}`);
    const rotating = vaultWith(db, keyB, keyA);
    t.equal((await rotating.get(owners[0]!, 'token'))!.value.reveal(), 'value-of-r0', 'the old key still decrypts before the rotation');
    const report = await rotating.rotate({ pageSize: 3 });
    t.equal(report.keyId, idOf(keyB));
    t.equal(report.changed, 0);
    t.ok(report.resealed >= owners.length, 'every readable value was re-encrypted');
    const { rows } = await db.query<{ n: number }>('SELECT count(*)::int AS n FROM secrets WHERE key_id <> $1 AND owner_kind = $2', [idOf(keyB), 'rotation']);
    t.equal(rows[0]!.n, 0);
    const newOnly = vaultWith(db, keyB);
    for (const owner of owners) t.equal((await newOnly.get(owner, 'token'))!.value.reveal(), `value-of-${owner.id}`);
    t.equal((await newOnly.get(owners[0]!, 'token'))!.ref.version, 1, 're-encryption keeps the version');
    await rejectsWith(t, vaultWith(db, keyA).get(owners[0]!, 'token'), 'unknown_key', 'the old key alone no longer opens it');
  });

  t.test('a rotation reports what no key opens and leaves it alone', async (t) => {
    await vaultWith(db, keyC).put({ kind: 'orphan', id: 'o1' }, 'token', 'under-a-lost-key');
    const report = await vaultWith(db, keyB).rotate();
    t.same(
      report.failed.filter((f) => f.owner.kind === 'orphan'),
      [{ owner: { kind: 'orphan', id: 'o1' }, name: 'token', reason: 'unknown_key' }],
    );
    t.notMatch(JSON.stringify(report), /under-a-lost-key/);
    t.equal((await vaultWith(db, keyC).get({ kind: 'orphan', id: 'o1' }, 'token'))!.value.reveal(), 'under-a-lost-key');
  });

  t.test('a rotation never overwrites a value put while it ran', async (t) => {
    const owner = { kind: 'race', id: 'x1' };
    await vaultWith(db, keyA).put(owner, 'token', 'before');
    // Between the rotation's read and its write, a replica still on the old key list puts a new value.
    const racing: (q: Queryable) => SecretStore = (q) => {
      const store = new SqlSecretStore(q);
      return Object.assign(Object.create(store) as SecretStore, {
        async listNotUnderKey(keyId: string, options: Parameters<SecretStore['listNotUnderKey']>[1]) {
          const page = await store.listNotUnderKey(keyId, options);
          if (page.some((s) => s.owner.id === 'x1')) await vaultWith(db, keyA).put(owner, 'token', 'after');
          return page;
        },
      });
    };
    const report = await new SecretVault(racing, db, SecretKeyring.fromEntries([keyB, keyA])).rotate();
    t.ok(report.changed >= 1);
    t.equal((await vaultWith(db, keyB, keyA).get(owner, 'token'))!.value.reveal(), 'after');
  });

  t.test('within a transaction, a secret shares its owner’s fate', async (t) => {
    const owner = { kind: 'webhook', id: 'wh_tx' };
    await t.rejects(
      db.transaction(async (tx) => {
        await vault.within(tx).put(owner, 'signing_secret', 'rolled-back');
        throw new Error('the webhook insert failed');
      }),
    );
    t.equal(await vault.get(owner, 'signing_secret'), null);
    await db.transaction(async (tx) => vault.within(tx).put(owner, 'signing_secret', 'committed'));
    t.equal((await vault.get(owner, 'signing_secret'))!.value.reveal(), 'committed');
  });

  t.test('names that could blur the binding, and oversized values, are refused', async (t) => {
    await rejectsWith(t, vault.put({ kind: 'webhook', id: 'wh\n1' }, 'n', 'v'), 'invalid_name');
    await rejectsWith(t, vault.put({ kind: 'Webhook', id: 'wh_1' }, 'n', 'v'), 'invalid_name');
    await rejectsWith(t, vault.put(hook, 'a\nb', 'v'), 'invalid_name');
    await rejectsWith(t, vault.put(hook, 'big', 'x'.repeat(64 * 1024 + 1)), 'too_large');
    t.ok(await vault.put(hook, 'from-secret-value', new SecretValue('wrapped')), 'a SecretValue can be stored as it is');
  });

  t.test('without a key the vault lists and deletes but neither encrypts nor decrypts', async (t) => {
    const keyless = new SecretVault(sqlStore, db, null);
    await rejectsWith(t, keyless.put(hook, 'n', 'v'), 'unconfigured');
    await rejectsWith(t, keyless.get(hook, 'signing_secret'), 'unconfigured');
    t.ok((await keyless.list(hook)).length > 0);
  });
}

for (const backend of databaseBackends()) {
  t.test(`secret vault on ${backend.name}`, async (t) => {
    const { db, cleanup } = await backend.create();
    t.teardown(cleanup);
    await vaultContract(t, db);
  });
}
