import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { parseConfig } from '../../config/load.ts';
import { generateKeyEntry, loadSecretKeys, prependKeyToFile, readKeyFile } from '../../core/services/secret-keys.ts';
import { assertConfigError } from '../helpers/config-errors.ts';

const dir = mkdtempSync(join(tmpdir(), 'svc-secret-keys-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));
let dirs = 0;
const freshDir = () => join(dir, `data-${++dirs}`);

/** The embedded database on disk under `dataDir` (nothing is opened: only the key rules are exercised). */
const onDisk = (dataDir: string, env: Record<string, string> = {}) => parseConfig({ storage: { dataDir, database: { driver: 'pglite', dataDir: join(dataDir, 'pglite') } } }, env);

t.test('SVC_SECRET_KEYS lists the keys, the first one encrypting', async (t) => {
  const [a, b] = [generateKeyEntry(), generateKeyEntry()];
  const config = onDisk(freshDir(), { SVC_SECRET_KEYS: `${a}, ${b}` });
  t.same(config.secrets.keys, [a, b]);
  const loaded = await loadSecretKeys(config);
  t.same(loaded.source, { kind: 'config' });
  t.equal(loaded.keyring!.current.id, a!.split(':')[0]);
  t.ok(loaded.keyring!.get(b!.split(':')[0]!));
});

t.test('a malformed key is a boot error naming secrets.keys and not repeating the key', async (t) => {
  const almost = `k1:${Buffer.alloc(16, 7).toString('base64')}`;
  assertConfigError(t, () => parseConfig({}, { SVC_SECRET_KEYS: almost }), 'secrets.keys.0', /32-byte key/);
  const message = (() => {
    try {
      parseConfig({}, { SVC_SECRET_KEYS: almost });
      return '';
    } catch (error) {
      return (error as Error).message;
    }
  })();
  t.notOk(message.includes(almost.split(':')[1]!), 'the key is not in the message');
  const entry = generateKeyEntry();
  assertConfigError(t, () => parseConfig({}, { SVC_SECRET_KEYS: `${entry},${entry}` }), 'secrets.keys', /unique/);
});

t.test('on the embedded database the first start creates a private key file, and later starts reuse it', async (t) => {
  const dataDir = freshDir();
  const first = await loadSecretKeys(onDisk(dataDir));
  const file = join(dataDir, 'secret-keys');
  t.same(first.source, { kind: 'file', path: file, created: true });
  t.equal(statSync(file).mode & 0o777, 0o600);
  t.equal(first.warning, undefined);
  const second = await loadSecretKeys(onDisk(dataDir));
  t.same(second.source, { kind: 'file', path: file, created: false });
  t.equal(second.keyring!.current.id, first.keyring!.current.id);
});

t.test('a key file others can read still works, with a warning', async (t) => {
  const dataDir = freshDir();
  await loadSecretKeys(onDisk(dataDir));
  chmodSync(join(dataDir, 'secret-keys'), 0o644);
  t.match((await loadSecretKeys(onDisk(dataDir))).warning, /chmod 600/);
});

t.test('a new key goes in front of the file’s others', async (t) => {
  const dataDir = freshDir();
  const first = await loadSecretKeys(onDisk(dataDir));
  const file = join(dataDir, 'secret-keys');
  const id = await prependKeyToFile(file);
  const entries = await readKeyFile(file);
  t.equal(entries.length, 2);
  t.equal(entries[0]!.split(':')[0], id);
  t.equal(entries[1]!.split(':')[0], first.keyring!.current.id);
  t.equal(statSync(file).mode & 0o777, 0o600);
  t.equal((await loadSecretKeys(onDisk(dataDir))).keyring!.current.id, id);
});

t.test('an in-memory database gets a throwaway key and writes no file', async (t) => {
  const dataDir = freshDir();
  const loaded = await loadSecretKeys(parseConfig({ storage: { dataDir, database: { driver: 'pglite', dataDir: 'memory://' } } }));
  t.same(loaded.source, { kind: 'ephemeral' });
  t.ok(loaded.keyring);
  t.notOk(existsSync(dataDir));
});

t.test('PostgreSQL without keys gets none, and a warning to set SVC_SECRET_KEYS', async (t) => {
  const loaded = await loadSecretKeys(parseConfig({ storage: { database: { driver: 'postgres', url: 'postgres://x/y' } } }));
  t.equal(loaded.keyring, null);
  t.match(loaded.warning, /SVC_SECRET_KEYS/);
});

t.test('secrets.keyFile names the key file for any database', async (t) => {
  const file = join(freshDir(), 'keys');
  const loaded = await loadSecretKeys(parseConfig({ storage: { database: { driver: 'postgres', url: 'postgres://x/y' } }, secrets: { keyFile: file } }));
  t.match(loaded.source, { kind: 'file', path: file, created: true });
  t.match(readFileSync(file, 'utf8'), /^# Keys that encrypt customer secrets/);
});
