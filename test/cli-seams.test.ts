import t from 'tap';
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { loadConfig } from '../config/load.ts';
import { createDatabase } from '../composition/create-database.ts';
import { coreMigrations } from '../adapters/sql/core-migrations.ts';
import { SqlMailOutbox } from '../adapters/sql/mail-outbox.ts';
import { runMigrations } from '../adapters/sql/migrator.ts';
import { SqlSecretStore } from '../adapters/sql/secret-store.ts';
import type { Database } from '../core/ports/database.ts';
import { loadSecretKeys } from '../core/services/secret-keys.ts';
import { SecretVault } from '../core/services/secret-vault.ts';
import { FileRuntimeState } from '../plugins/apps/runtime/index.ts';

const run = promisify(execFile);
const dataDir = mkdtempSync(join(tmpdir(), 'svc-cli-seams-'));
t.teardown(() => rmSync(dataDir, { recursive: true, force: true }));

/** Runs the CLI against the embedded database in the temporary directory. */
async function cli(...args: string[]) {
  const env = { ...process.env, SVC_DATA_DIR: dataDir, DATABASE_URL: '', SVC_SECRET_KEYS: '' };
  try {
    const { stdout, stderr } = await run(process.execPath, ['--import', 'tsx', 'cli.ts', ...args], { env, timeout: 60_000 });
    return { code: 0, stdout, stderr };
  } catch (error) {
    const failed = error as { code: number; stdout: string; stderr: string };
    return { code: failed.code, stdout: failed.stdout, stderr: failed.stderr };
  }
}

/** The CLI's own configuration and database, opened in this process between CLI runs (PGlite allows one process at a time). */
async function withDatabase<T>(work: (db: Database, config: ReturnType<typeof loadConfig>) => Promise<T>): Promise<T> {
  const config = loadConfig({ env: { SVC_DATA_DIR: dataDir } });
  const db = await createDatabase(config.storage.database);
  try {
    await runMigrations(db, coreMigrations);
    return await work(db, config);
  } finally {
    await db.close();
  }
}

const owner = { kind: 'webhook', id: 'wh_cli' };
const oldKeyId = await withDatabase(async (db, config) => {
  const outbox = new SqlMailOutbox(db, 'svc <no-reply@localhost>');
  await outbox.send({ to: 'ada@acme.test', subject: 'Your sign-in code', text: 'Code: 314159' });
  await outbox.send({ to: 'bob@acme.test', subject: 'You are invited', text: 'Join Acme' });
  const { keyring } = await loadSecretKeys(config);
  await new SecretVault((q) => new SqlSecretStore(q), db, keyring).put(owner, 'signing_secret', 'whsec_cli-value');
  return keyring!.current.id;
});

t.test('mail list shows the local outbox newest first, by recipient whatever its case', async (t) => {
  const all = await cli('mail', 'list');
  t.equal(all.code, 0, all.stderr);
  t.ok(all.stdout.indexOf('You are invited') < all.stdout.indexOf('Your sign-in code'), 'newest first');
  const ada = await cli('mail', 'list', '--to', 'ADA@acme.test');
  t.match(ada.stdout, /To: ada@acme\.test[\s\S]*Code: 314159/);
  t.notMatch(ada.stdout, /invited/);
});

t.test('secrets rotate --new-key puts a new key in the key file and re-encrypts every secret under it', async (t) => {
  const rotated = await cli('secrets', 'rotate', '--new-key');
  t.equal(rotated.code, 0, rotated.stderr);
  const newKeyId = /added key (\S+) in front of/.exec(rotated.stdout)?.[1];
  t.ok(newKeyId);
  t.not(newKeyId, oldKeyId);
  t.match(rotated.stdout, new RegExp(`re-encrypted 1 secret\\(s\\) under key ${newKeyId}`));
  t.match(rotated.stdout, new RegExp(`the older keys \\(${oldKeyId}\\) are no longer needed`));
  t.notMatch(rotated.stdout + rotated.stderr, /whsec_cli-value/);
  await withDatabase(async (db, config) => {
    const { keyring } = await loadSecretKeys(config);
    t.equal(keyring!.current.id, newKeyId);
    const { rows } = await db.query<{ key_id: string }>('SELECT key_id FROM secrets');
    t.same(
      rows.map((r) => r.key_id),
      [newKeyId],
    );
    const got = await new SecretVault((q) => new SqlSecretStore(q), db, keyring).get(owner, 'signing_secret');
    t.equal(got!.value.reveal(), 'whsec_cli-value');
  });
});

t.test("secrets rotate keeps the older key while the apps runtime's state file is sealed under it", async (t) => {
  const stateDir = join(dataDir, 'apps', 'runtime');
  const record = {
    serviceId: 'svc-cli',
    desired: 'running' as const,
    current: {
      serviceId: 'svc-cli',
      deploymentId: 'dep-cli',
      artifactDir: '/nowhere',
      startCommand: 'node server.js',
      env: { SVC_API_KEY: 'sk-cli-value' },
    },
    groups: [],
  };
  // Written by the service under the key current before the rotation.
  const before = await withDatabase(async (db, config) => {
    const { keyring } = await loadSecretKeys(config);
    const sealer = new SecretVault((q) => new SqlSecretStore(q), db, keyring);
    await new FileRuntimeState(stateDir, { sealer }).save(record);
    return keyring!.current.id;
  });
  const rotated = await cli('secrets', 'rotate', '--new-key');
  t.equal(rotated.code, 0, rotated.stderr);
  const newKeyId = /added key (\S+) in front of/.exec(rotated.stdout)?.[1];
  const told = `the apps runtime's state in ${stateDir} is sealed under ${before}`;
  t.match(rotated.stdout, `${told}: the service seals it under ${newKeyId} when it next starts`);
  t.notMatch(rotated.stdout, /no longer needed/, 'the older keys are not declared unneeded');

  // The service starts with the new key in front: the state file is sealed again under it.
  await withDatabase(async (db, config) => {
    const { keyring } = await loadSecretKeys(config);
    const sealer = new SecretVault((q) => new SqlSecretStore(q), db, keyring);
    const state = new FileRuntimeState(stateDir, { sealer });
    const [loaded] = await state.load();
    t.same(loaded, record);
    await state.save(loaded!);
  });
  const again = await cli('secrets', 'rotate');
  t.equal(again.code, 0, again.stderr);
  t.notMatch(again.stdout, /apps runtime/);
  t.match(again.stdout, /are no longer needed/);
});
