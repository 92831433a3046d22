import t from 'tap';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { once } from 'node:events';
import { generateToken, SESSION_PREFIX } from '../../core/secrets.ts';

async function freePort(): Promise<number> {
  const server = createServer();
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const port = (server.address() as { port: number }).port;
  server.close();
  return port;
}

t.test('SIGTERM lets an in-flight request finish, then the process exits 0', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'svc-shutdown-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const configPath = join(dir, 'config.yaml');
  writeFileSync(
    configPath,
    `server: { logLevel: warn, shutdownGraceMs: 10000 }
storage: { database: { driver: pglite, dataDir: ${join(dir, 'db')} } }
plugins:
  account: {}
  inference:
    providers: { slow: { type: mock, latencyMs: 1500 } }
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
  for (let i = 0; i < 300; i += 1) {
    if (await fetch(`${base}/health`).then((r) => r.ok, () => false)) break;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }

  const inFlight = fetch(`${base}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'slow-model', messages: [{ role: 'user', content: 'take your time' }] }),
  });
  await new Promise((resolve) => setTimeout(resolve, 300));
  const exited = once(child, 'exit');
  child.kill('SIGTERM');
  const response = await inFlight;
  t.equal(response.status, 200, 'the in-flight request completed');
  t.match(((await response.json()) as { choices: Array<{ message: { content: string } }> }).choices[0]?.message.content, /take your time/);
  const [code] = await exited;
  t.equal(code, 0, `exit code (output: ${output.slice(-500)})`);
});
