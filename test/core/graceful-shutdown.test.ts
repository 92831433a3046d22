import t from 'tap';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { once } from 'node:events';
import { generateToken, SESSION_PREFIX } from '../../core/identity/api-tokens.ts';
import { buildTestApp } from '../helpers/app.ts';
import { assertEnvelope } from '../helpers/envelope.ts';
import { RawConnection } from '../helpers/raw-http.ts';
import { eventually } from '../helpers/eventually.ts';
import { deferred } from '../helpers/jobs.ts';
import { startFakeOpenAIUpstream } from '../fakes/fake-openai-upstream.ts';

async function freePort(): Promise<number> {
  const server = createServer();
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const port = (server.address() as { port: number }).port;
  server.close();
  return port;
}

// A child process compiles and starts (PGlite's first start included): on a loaded 2-core machine
// that alone can take a minute, so the file gets more than tap's default 120 s.
t.setTimeout(400_000);

t.test('SIGTERM lets an in-flight request finish, then the process exits 0', async (t) => {
  // The upstream holds the call until the test lets it go: SIGTERM is sent while it is in flight.
  const upstream = await startFakeOpenAIUpstream();
  t.teardown(() => upstream.close());
  const release = deferred();
  upstream.enqueue({ kind: 'reply', content: 'take your time', holdUntil: release.promise });
  const dir = mkdtempSync(join(tmpdir(), 'svc-shutdown-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const configPath = join(dir, 'config.yaml');
  writeFileSync(
    configPath,
    `server: { logLevel: warn, shutdownGraceMs: 10000 }
storage: { database: { driver: pglite, dataDir: ${join(dir, 'db')} } }
plugins:
  account: {}
  keys: {}
  inference:
    providers: { slow: { type: openai, baseUrl: '${upstream.baseUrl}', apiKey: sk-test, allowPrivateNetwork: true } }
    models: { slow-model: { routes: [{ provider: slow, model: slow }] } }
`,
  );
  const port = await freePort();
  const token = generateToken(SESSION_PREFIX);
  const child = spawn(process.execPath, ['--import', 'tsx', 'main.ts'], {
    env: { ...process.env, SVC_CONFIG: configPath, PORT: String(port), SVC_OWNER_TOKEN: token, DATABASE_URL: '', REDIS_URL: '' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  t.teardown(() => child.kill('SIGKILL'));
  let output = '';
  child.stdout.on('data', (chunk) => (output += chunk));
  child.stderr.on('data', (chunk) => (output += chunk));
  const base = `http://127.0.0.1:${port}`;
  await eventually(
    () =>
      fetch(`${base}/health`).then(
        (r) => r.ok,
        () => false,
      ),
    'the gateway to answer /health',
    { timeoutMs: 120_000, everyMs: 100 },
  );

  const created = await fetch(`${base}/client/keys`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify({ name: 'shutdown', scopes: ['inference'] }),
  });
  const { key } = (await created.json()) as { key: string };

  const inFlight = fetch(`${base}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'slow-model', messages: [{ role: 'user', content: 'take your time' }] }),
  });
  await upstream.arrived();
  const exited = once(child, 'exit');
  child.kill('SIGTERM');
  // Let the call go only once the process is draining (a new request is refused or answered
  // 503): its answer is then what the shutdown waits for.
  await eventually(
    () =>
      fetch(`${base}/health`).then(
        (r) => !r.ok,
        () => true,
      ),
    'the process to start draining',
    { timeoutMs: 30_000 },
  );
  release.resolve();
  const response = await inFlight;
  t.equal(response.status, 200, 'the in-flight request completed');
  t.match(((await response.json()) as { choices: Array<{ message: { content: string } }> }).choices[0]?.message.content, /take your time/);
  const [code] = await exited;
  t.equal(code, 0, `exit code (output: ${output.slice(-500)})`);
});

t.test('while draining, a request on a kept-alive connection answers 503 shutting_down with retry-after and connection: close', async (t) => {
  const test = await buildTestApp(t, { ready: false });
  let release!: () => void;
  const held = new Promise<void>((resolve) => (release = resolve));
  let entered!: () => void;
  const handling = new Promise<void>((resolve) => (entered = resolve));
  test.app.get('/test/held', { config: { auth: false } }, async () => {
    entered();
    await held;
    return { finished: true };
  });
  await test.app.listen({ host: '127.0.0.1', port: 0 });
  // The listener closes after the preClose hooks; a connection still busy then is kept, idle ones are closed.
  const serverClosing = new Promise<void>((resolve) => {
    const { server } = test.app;
    const close = server.close.bind(server);
    server.close = (callback) => {
      resolve();
      return close(callback);
    };
  });

  // A connection busy at close time is not closed as idle: it is the one a next request can use.
  const connection = await RawConnection.open(test.app);
  t.teardown(() => connection.close());
  connection.write('GET /test/held HTTP/1.1\r\nHost: x\r\n\r\n');
  await handling;
  const closed = test.app.close();
  await serverClosing;
  release();
  const inFlight = await connection.response();
  t.equal(inFlight.statusCode, 200, 'the request in flight when draining began finishes');
  t.same(JSON.parse(inFlight.body), { finished: true });

  connection.write('GET /health HTTP/1.1\r\nHost: x\r\n\r\n');
  const refused = await connection.response();
  assertEnvelope(t, refused, 503, { code: 'shutting_down' });
  t.equal(refused.headers['retry-after'], '1', 'retry-after says when to retry');
  t.equal(refused.headers.connection, 'close', 'connection: close');
  t.match(refused.headers['x-request-id'], /^req_/, 'carries a request id');
  await connection.closed;
  await closed;
});
