import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import t from 'tap';
import { assertConfigError } from '../helpers/config-errors.ts';
import { ConfigError, DEFAULT_CONFIG_PATH, loadConfig, parseConfig } from '../../config/load.ts';
import { definePlugin } from '../../core/kernel/plugin.ts';
import { resolvePlugins } from '../../core/kernel/plugin-loader.ts';
import { manifest } from '../../plugins/index.ts';
import { blobStorageOf } from '../../composition/create-blob-store.ts';
import { keyFileOf } from '../../core/services/secret-keys.ts';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const dir = mkdtempSync(join(tmpdir(), 'svc-config-test-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));

let fileCount = 0;
/** Writes YAML to a fresh temp file and returns its path. */
function yamlFile(text: string): string {
  const path = join(dir, `config-${++fileCount}.yaml`);
  writeFileSync(path, text);
  return path;
}

const OWNER_TOKEN = `svc_sess_${'A1b2C3d4'.repeat(4)}`;

t.test('config/default.yaml loads and validates with an empty environment', async (t) => {
  const config = loadConfig({ path: DEFAULT_CONFIG_PATH, env: {} });
  t.equal(config.server.host, '127.0.0.1', 'HOST defaults through ${HOST:-127.0.0.1}');
  t.equal(config.server.port, 8080);
  t.equal(config.server.bodyLimitBytes, 10 * 1024 * 1024, 'the 10 MB body limit');
  t.equal(config.server.uploadLimitBytes, 512 * 1024 * 1024, 'uploads may be larger: 512 MB');
  t.same(blobStorageOf(config.storage), { driver: 'filesystem', dir: resolve('data/blobs') });
  t.equal(config.mail.driver, 'outbox');
  t.equal(config.storage.database.driver, 'pglite');
  t.equal(config.storage.coordination.driver, 'memory');
  for (const name of ['account', 'projects', 'keys']) t.ok(Object.hasOwn(config.plugins, name), `enables ${name}`);
});

t.test('server timeouts default to 10 s for headers, 120 s for the whole request and 72 s of keep-alive idle', async (t) => {
  const { server } = parseConfig({});
  t.equal(server.headersTimeoutMs, 10_000);
  t.equal(server.requestTimeoutMs, 120_000);
  t.equal(server.keepAliveTimeoutMs, 72_000);
});

t.test('a headersTimeoutMs above requestTimeoutMs fails naming server.headersTimeoutMs', async (t) => {
  assertConfigError(t, () => parseConfig({ server: { headersTimeoutMs: 5_000, requestTimeoutMs: 1_000 } }), 'server.headersTimeoutMs', /must not exceed server\.requestTimeoutMs/);
});

t.test('config/default.yaml enables only known plugins, with valid settings and their dependencies', async (t) => {
  const config = loadConfig({ path: DEFAULT_CONFIG_PATH, env: {} });
  const enabled = Object.entries(config.plugins)
    .filter(([, section]) => section !== false)
    .map(([name]) => name);
  const resolved = resolvePlugins(manifest, config.plugins);
  t.same(resolved.map((r) => r.plugin.name).sort(), enabled.sort());
});

t.test('without a path, SVC_CONFIG names the config file', async (t) => {
  const path = yamlFile('server:\n  port: 9123\n');
  t.equal(loadConfig({ env: { SVC_CONFIG: path } }).server.port, 9123);
});

t.test('${VAR} is replaced by the environment variable', async (t) => {
  const path = yamlFile('server:\n  host: ${BIND_ADDRESS}\n');
  t.equal(loadConfig({ path, env: { BIND_ADDRESS: '10.1.2.3' } }).server.host, '10.1.2.3');
});

t.test('${VAR} inside a longer string is replaced in place', async (t) => {
  const path = yamlFile('storage:\n  database:\n    driver: postgres\n    url: postgres://app:${DB_PASSWORD}@db:5432/svc\n');
  const config = loadConfig({ path, env: { DB_PASSWORD: 's3cret' } });
  t.same(config.storage.database, { driver: 'postgres', url: 'postgres://app:s3cret@db:5432/svc', poolSize: 20 });
});

t.test('${VAR:-default} uses the default when the variable is unset', async (t) => {
  const path = yamlFile('server:\n  host: ${BIND_ADDRESS:-0.0.0.0}\n');
  t.equal(loadConfig({ path, env: {} }).server.host, '0.0.0.0');
});

t.test('${VAR:-default} uses the default when the variable is empty', async (t) => {
  const path = yamlFile('server:\n  host: ${BIND_ADDRESS:-0.0.0.0}\n');
  t.equal(loadConfig({ path, env: { BIND_ADDRESS: '' } }).server.host, '0.0.0.0');
});

t.test('${VAR:-default} uses the variable when it is set', async (t) => {
  const path = yamlFile('server:\n  host: ${BIND_ADDRESS:-0.0.0.0}\n');
  t.equal(loadConfig({ path, env: { BIND_ADDRESS: '192.168.0.9' } }).server.host, '192.168.0.9');
});

t.test('a missing environment variable fails naming the field and the variable', async (t) => {
  const path = yamlFile('storage:\n  database:\n    driver: postgres\n    url: ${SVC_TEST_UNSET_DB_URL}\n');
  assertConfigError(t, () => loadConfig({ path, env: {} }), 'storage.database.url', /SVC_TEST_UNSET_DB_URL/);
});

t.test('a missing environment variable inside a plugin section names plugins.<name>.<field>', async (t) => {
  const path = yamlFile('plugins:\n  keys:\n    secret: ${SVC_TEST_UNSET_SECRET}\n');
  assertConfigError(t, () => loadConfig({ path, env: {} }), 'plugins.keys.secret', /SVC_TEST_UNSET_SECRET/);
});

t.test('PORT overrides server.port from the file', async (t) => {
  const path = yamlFile('server:\n  port: 8080\n');
  t.equal(loadConfig({ path, env: { PORT: '9999' } }).server.port, 9999);
});

t.test('a PORT that is not an integer fails naming PORT', async (t) => {
  assertConfigError(t, () => parseConfig({}, { PORT: 'eighty' }), 'PORT');
});

t.test('a PORT out of range fails naming server.port', async (t) => {
  assertConfigError(t, () => parseConfig({}, { PORT: '70000' }), 'server.port');
});

t.test('HOST overrides server.host from the file', async (t) => {
  const path = yamlFile('server:\n  host: 127.0.0.1\n');
  t.equal(loadConfig({ path, env: { HOST: '0.0.0.0' } }).server.host, '0.0.0.0');
});

t.test('LOG_LEVEL overrides server.logLevel and is validated', async (t) => {
  const path = yamlFile('server:\n  logLevel: info\n');
  t.equal(loadConfig({ path, env: { LOG_LEVEL: 'warn' } }).server.logLevel, 'warn');
  assertConfigError(t, () => loadConfig({ path, env: { LOG_LEVEL: 'loud' } }), 'server.logLevel');
});

t.test('SVC_DATA_DIR moves the embedded database under that directory', async (t) => {
  const path = yamlFile('storage:\n  database:\n    driver: pglite\n    dataDir: ./data/pglite\n');
  const config = loadConfig({ path, env: { SVC_DATA_DIR: '/var/lib/svc' } });
  t.same(config.storage.database, { driver: 'pglite', dataDir: join('/var/lib/svc', 'pglite') });
});

t.test('SVC_DATA_DIR moves the service data directory (the billing journal’s home), with PostgreSQL too', async (t) => {
  t.equal(loadConfig({ path: DEFAULT_CONFIG_PATH, env: {} }).storage.dataDir, './data');
  const config = loadConfig({ path: DEFAULT_CONFIG_PATH, env: { DATABASE_URL: 'postgres://pg/svc', SVC_DATA_DIR: '/var/lib/svc' } });
  t.equal(config.storage.dataDir, '/var/lib/svc');
});

t.test('SVC_DATA_DIR also moves the blob files and the secret key file', async (t) => {
  const config = loadConfig({ path: DEFAULT_CONFIG_PATH, env: { SVC_DATA_DIR: '/var/lib/svc' } });
  t.equal(config.storage.dataDir, '/var/lib/svc');
  t.same(blobStorageOf(config.storage), { driver: 'filesystem', dir: join('/var/lib/svc', 'blobs') });
  t.equal(keyFileOf(config), join('/var/lib/svc', 'secret-keys'));
});

t.test('blobs follow the database unless configured: files beside the embedded one, rows in PostgreSQL', async (t) => {
  t.same(blobStorageOf(loadConfig({ path: DEFAULT_CONFIG_PATH, env: { DATABASE_URL: 'postgres://pg/svc' } }).storage), { driver: 'database' });
  t.same(blobStorageOf(parseConfig({ storage: { database: { driver: 'pglite', dataDir: 'memory://' } } }).storage), { driver: 'database' });
  const shared = parseConfig({ storage: { database: { driver: 'postgres', url: 'postgres://pg/svc' }, blobs: { driver: 'filesystem', dir: '/mnt/shared/blobs' } } });
  t.same(blobStorageOf(shared.storage), { driver: 'filesystem', dir: '/mnt/shared/blobs' });
  assertConfigError(t, () => parseConfig({ storage: { blobs: { driver: 's3' } } }), 'storage.blobs.driver');
});

t.test('SVC_SECRET_KEYS gives the secret keys, and there are none with PostgreSQL otherwise', async (t) => {
  const entry = `k1:${Buffer.alloc(32, 1).toString('base64')}`;
  t.same(loadConfig({ path: DEFAULT_CONFIG_PATH, env: { SVC_SECRET_KEYS: entry } }).secrets.keys, [entry]);
  const postgres = loadConfig({ path: DEFAULT_CONFIG_PATH, env: { DATABASE_URL: 'postgres://pg/svc' } });
  t.same(postgres.secrets.keys, []);
  t.equal(keyFileOf(postgres), null);
});

t.test('DATABASE_URL switches storage to PostgreSQL at that address', async (t) => {
  const path = yamlFile('storage:\n  database:\n    driver: pglite\n    dataDir: ./data/pglite\n');
  const config = loadConfig({ path, env: { DATABASE_URL: 'postgres://u:p@pg:5432/svc' } });
  t.equal(config.storage.database.driver, 'postgres');
  t.equal(config.storage.database.driver === 'postgres' ? config.storage.database.url : null, 'postgres://u:p@pg:5432/svc');
});

t.test('DATABASE_URL wins over SVC_DATA_DIR', async (t) => {
  const config = loadConfig({ path: DEFAULT_CONFIG_PATH, env: { DATABASE_URL: 'postgres://pg/svc', SVC_DATA_DIR: '/var/lib/svc' } });
  t.equal(config.storage.database.driver, 'postgres');
});

t.test('REDIS_URL switches coordination to Redis at that address', async (t) => {
  const path = yamlFile('storage:\n  coordination:\n    driver: memory\n');
  const config = loadConfig({ path, env: { REDIS_URL: 'redis://cache:6379' } });
  t.equal(config.storage.coordination.driver, 'redis');
  t.equal(config.storage.coordination.driver === 'redis' ? config.storage.coordination.url : null, 'redis://cache:6379');
});

t.test('SVC_OWNER_TOKEN sets the bootstrap owner token', async (t) => {
  const path = yamlFile('bootstrap:\n  ownerName: Ada\n');
  const config = loadConfig({ path, env: { SVC_OWNER_TOKEN: OWNER_TOKEN } });
  t.equal(config.bootstrap.ownerToken, OWNER_TOKEN);
  t.equal(config.bootstrap.ownerName, 'Ada', 'the rest of the bootstrap section is kept');
});

t.test('an SVC_OWNER_TOKEN of the wrong shape fails naming bootstrap.ownerToken', async (t) => {
  assertConfigError(t, () => parseConfig({}, { SVC_OWNER_TOKEN: 'not-a-session-token' }), 'bootstrap.ownerToken');
});

t.test('a field of the wrong type fails naming the field', async (t) => {
  const path = yamlFile('server:\n  port: eighty\n');
  assertConfigError(t, () => loadConfig({ path, env: {} }), 'server.port');
});

t.test('a nested field of the wrong type fails naming the full path', async (t) => {
  const path = yamlFile('storage:\n  database:\n    driver: postgres\n    url: postgres://pg/svc\n    poolSize: many\n');
  assertConfigError(t, () => loadConfig({ path, env: {} }), 'storage.database.poolSize');
});

for (const section of ['server', 'storage', 'auth', 'bootstrap'] as const) {
  t.test(`a config whose ${section} section is not a mapping fails naming ${section}`, async (t) => {
    const path = yamlFile(`${section}: 8080\n`);
    assertConfigError(t, () => loadConfig({ path, env: {} }), section);
  });
}

t.test('a bootstrap section that is not a mapping fails even when SVC_OWNER_TOKEN is set', async (t) => {
  const path = yamlFile('bootstrap: 5\n');
  assertConfigError(t, () => loadConfig({ path, env: { SVC_OWNER_TOKEN: OWNER_TOKEN } }), 'bootstrap');
});

for (const [shape, text] of [
  ['a list', '- server\n- storage\n'],
  ['a plain string', 'just some text\n'],
] as const) {
  t.test(`a config file that is ${shape} instead of a mapping is refused`, async (t) => {
    const path = yamlFile(text);
    let caught: unknown;
    try {
      loadConfig({ path, env: {} });
    } catch (error) {
      caught = error;
    }
    t.ok(caught instanceof ConfigError, 'throws a ConfigError instead of starting on the defaults');
    t.notOk(/[\r\n]/.test(caught instanceof Error ? caught.message : ''), 'in one line');
  });
}

t.test('an unknown field fails naming it', async (t) => {
  const path = yamlFile('server:\n  port: 8080\n  prot: 8081\n');
  assertConfigError(t, () => loadConfig({ path, env: {} }), 'server.prot');
});

t.test('an unknown top-level section fails naming it', async (t) => {
  const path = yamlFile('serverz:\n  port: 8080\n');
  assertConfigError(t, () => loadConfig({ path, env: {} }), 'serverz');
});

t.test('an unknown plugin fails naming plugins.<name>', async (t) => {
  const path = yamlFile('plugins:\n  keys: {}\n  no-such-plugin: {}\n');
  const config = loadConfig({ path, env: {} });
  assertConfigError(t, () => resolvePlugins(manifest, config.plugins), 'plugins.no-such-plugin');
});

t.test('a plugin whose dependency is not enabled fails naming plugins.<name> and the dependency', async (t) => {
  const base = definePlugin({ name: 'base', description: 'fixture' });
  const child = definePlugin({ name: 'child', description: 'fixture', dependsOn: ['base'] });
  const path = yamlFile('plugins:\n  child: {}\n');
  const config = loadConfig({ path, env: {} });
  assertConfigError(t, () => resolvePlugins([base, child], config.plugins), 'plugins.child', /base/);
});

t.test('a file that is not valid YAML fails in one line', async (t) => {
  const path = yamlFile('server:\n  port: [8080\n  host: x\n');
  assertConfigError(t, () => loadConfig({ path, env: {} }), path);
});

t.test('a config file that cannot be read fails naming the path', async (t) => {
  const path = join(dir, 'does-not-exist.yaml');
  assertConfigError(t, () => loadConfig({ path, env: {} }), path);
});

/** Runs main.ts (what `npm start` runs) with only the given environment. */
function runEntry(env: Record<string, string>): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((done, fail) => {
    const child = spawn(process.execPath, ['--import', 'tsx', 'main.ts'], {
      cwd: ROOT,
      env: { PATH: process.env.PATH ?? '', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), 20_000);
    child.on('error', fail);
    child.on('close', (code) => {
      clearTimeout(timer);
      done({ code, stdout, stderr });
    });
  });
}

t.test('the start entry refuses a bad config with one line on stderr and exit code 1', async (t) => {
  const [unknownField, unknownPlugin] = await Promise.all([
    runEntry({ SVC_CONFIG: yamlFile('server:\n  prot: 8081\n') }),
    runEntry({ SVC_CONFIG: yamlFile('server:\n  port: 0\nplugins:\n  no-such-plugin: {}\n') }),
  ]);
  for (const [label, result, field] of [
    ['unknown field', unknownField, 'server.prot'],
    ['unknown plugin', unknownPlugin, 'plugins.no-such-plugin'],
  ] as const) {
    t.equal(result.code, 1, `${label}: exit code 1`);
    const lines = result.stderr.split('\n').filter((line) => line.length > 0);
    t.equal(lines.length, 1, `${label}: one line on stderr: ${JSON.stringify(result.stderr)}`);
    t.match(lines[0] ?? '', /^config: /, `${label}: the line is the config error`);
    t.ok((lines[0] ?? '').includes(field), `${label}: names ${field}`);
    t.equal(result.stdout, '', `${label}: nothing on stdout`);
  }
});
