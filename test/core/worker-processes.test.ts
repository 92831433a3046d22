import t from 'tap';
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { generateToken, SESSION_PREFIX } from '../../core/identity/api-tokens.ts';
import { realServersConfig } from '../helpers/app.ts';
import { eventually } from '../helpers/eventually.ts';
import { deferred } from '../helpers/jobs.ts';
import { freePort } from '../helpers/service-process.ts';
import { startFakeOpenAIUpstream } from '../fakes/fake-openai-upstream.ts';

// Each case starts main.ts as its own process tree (a primary and its workers, each compiling the
// service): on a loaded 2-core machine that takes tens of seconds.
t.setTimeout(400_000);

interface Cluster {
  primary: ChildProcess;
  url: string;
  output: () => string;
  /** Resolves once the output has a line matching this. */
  printed: (pattern: RegExp) => Promise<void>;
}

function startCluster(t: { teardown(fn: () => unknown): void }, config: Record<string, unknown>, env: Record<string, string> = {}): Promise<Cluster> {
  const dir = mkdtempSync(join(tmpdir(), 'svc-workers-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const configPath = join(dir, 'config.yaml');
  writeFileSync(configPath, stringify(config));
  return freePort().then((port) => {
    const primary = spawn(process.execPath, ['--import', 'tsx', 'main.ts'], {
      env: { ...process.env, SVC_CONFIG: configPath, PORT: String(port), SVC_DATA_DIR: dir, DATABASE_URL: '', REDIS_URL: '', LOG_LEVEL: '', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    // A test that fails midway must not leave workers behind: they end when the primary is gone.
    t.teardown(() => primary.kill('SIGKILL'));
    let output = '';
    const waiters: Array<{ pattern: RegExp; resolve: () => void }> = [];
    const take = (chunk: Buffer) => {
      output += chunk.toString();
      for (const waiter of waiters.splice(0)) {
        if (waiter.pattern.test(output)) waiter.resolve();
        else waiters.push(waiter);
      }
    };
    primary.stdout!.on('data', take);
    primary.stderr!.on('data', take);
    const printed = (pattern: RegExp) =>
      new Promise<void>((resolve, reject) => {
        if (pattern.test(output)) return resolve();
        waiters.push({ pattern, resolve });
        primary.once('exit', (code) => reject(new Error(`the primary exited (${code}) before printing ${pattern}:\n${output.slice(-3000)}`)));
      });
    return { primary, url: `http://127.0.0.1:${port}`, output: () => output, printed };
  });
}

/** The `worker` labels of the series of this metric with a value above zero. */
async function workersCounting(url: string, metric: string): Promise<Map<string, number>> {
  const text = await (await fetch(`${url}/metrics`)).text();
  const counts = new Map<string, number>();
  for (const line of text.split('\n')) {
    if (!line.startsWith(`${metric}{`)) continue;
    const worker = /worker="(\d+)"/.exec(line)?.[1];
    const value = Number(line.slice(line.lastIndexOf(' ') + 1));
    if (worker !== undefined && value > 0) counts.set(worker, (counts.get(worker) ?? 0) + value);
  }
  return counts;
}

/** GET with a connection of its own: the primary hands each new connection to the next worker. */
function getOnNewConnection(url: string, token: string): Promise<Response> {
  return fetch(url, { headers: { authorization: `Bearer ${token}`, connection: 'close' } });
}

const servers = realServersConfig();
const needsServers = { skip: servers ? false : 'needs TEST_PG_URL and TEST_REDIS_URL' };

function sharedConfig(upstreamBaseUrl: string) {
  return {
    server: { workers: 2, logLevel: 'info', shutdownGraceMs: 10_000 },
    storage: servers!.storage,
    plugins: {
      account: {},
      keys: {},
      inference: {
        providers: { slow: { type: 'openai', baseUrl: upstreamBaseUrl, apiKey: 'sk-test', allowPrivateNetwork: true } },
        models: { 'slow-model': { routes: [{ provider: 'slow', model: 'slow' }] } },
      },
    },
  };
}

async function createKey(url: string, ownerToken: string): Promise<string> {
  const created = await fetch(`${url}/client/keys`, {
    method: 'POST',
    headers: { authorization: `Bearer ${ownerToken}`, 'content-type': 'application/json' },
    body: JSON.stringify({ name: 'workers', scopes: ['inference'] }),
  });
  return ((await created.json()) as { key: string }).key;
}

t.test('several workers on the embedded database or in-memory coordination: the boot refuses, naming what to set', async (t) => {
  const cluster = await startCluster(t, { server: { workers: 2 } });
  const [code] = (await once(cluster.primary, 'exit')) as [number];
  t.equal(code, 1);
  t.match(cluster.output(), /server\.workers: 2 processes cannot share this storage/);
  t.match(cluster.output(), /DATABASE_URL/);
  t.match(cluster.output(), /REDIS_URL/);
  t.notMatch(cluster.output(), /Server listening/, 'no worker was started');
});

t.test('SVC_WORKERS that is neither a number nor auto stops the boot', async (t) => {
  const cluster = await startCluster(t, {}, { SVC_WORKERS: 'many' });
  const [code] = (await once(cluster.primary, 'exit')) as [number];
  t.equal(code, 1);
  t.match(cluster.output(), /SVC_WORKERS: expected an integer or auto, got "many"/);
});

t.test('two workers share the port, PostgreSQL and Redis', needsServers, async (t) => {
  t.teardown(() => servers!.dropSchema());
  const upstream = await startFakeOpenAIUpstream();
  t.teardown(() => upstream.close());
  const ownerToken = generateToken(SESSION_PREFIX);
  const cluster = await startCluster(t, sharedConfig(upstream.baseUrl), { SVC_OWNER_TOKEN: ownerToken });
  await cluster.printed(/starting 1 more/);
  await eventually(() => (cluster.output().match(/Server listening at/g)?.length ?? 0) >= 2, 'both workers to listen', { timeoutMs: 120_000 });
  t.match(cluster.output(), /worker 1 \(pid \d+\) listens; starting 1 more/, 'the first worker started alone');

  t.test('connections are served by both workers, and /metrics shows each one labelled', async (t) => {
    const key = await createKey(cluster.url, ownerToken);
    for (let i = 0; i < 8; i++) t.equal((await getOnNewConnection(`${cluster.url}/v1/models`, key)).status, 200);
    const counts = await workersCounting(cluster.url, 'svc_gateway_requests_total');
    t.same([...counts.keys()].sort(), ['1', '2'], 'each worker counted some of the calls');
    t.equal(
      [...counts.values()].reduce((a, b) => a + b, 0),
      8,
      'and the scrape holds all of them once',
    );
  });

  t.test('a key created through one worker authenticates on the other', async (t) => {
    const key = await createKey(cluster.url, ownerToken);
    const statuses = await Promise.all(Array.from({ length: 4 }, () => getOnNewConnection(`${cluster.url}/client/whoami`, key)));
    t.same(
      statuses.map((r) => r.status),
      [200, 200, 200, 200],
    );
  });

  t.test('a worker that dies is replaced in its slot', async (t) => {
    const text = await (await fetch(`${cluster.url}/metrics`)).text();
    t.match(text, /worker="2"/);
    const pid = Number(/worker 1 \(pid (\d+)\) listens/.exec(cluster.output())![1]);
    process.kill(pid, 'SIGKILL');
    await cluster.printed(new RegExp(`worker 1 \\(pid ${pid}\\) exited \\(SIGKILL\\); replacing it`));
    await eventually(() => (cluster.output().match(/Server listening at/g)?.length ?? 0) >= 3, 'the replacement to listen', { timeoutMs: 120_000 });
    const key = await createKey(cluster.url, ownerToken);
    for (let i = 0; i < 4; i++) t.equal((await getOnNewConnection(`${cluster.url}/v1/models`, key)).status, 200);
    t.same([...(await workersCounting(cluster.url, 'process_cpu_user_seconds_total')).keys()].sort(), ['1', '2'], 'slots 1 and 2 again');
  });

  t.test('SIGTERM to the primary lets an in-flight call finish on its worker, then every process exits 0', async (t) => {
    const key = await createKey(cluster.url, ownerToken);
    const release = deferred();
    upstream.enqueue({ kind: 'reply', content: 'take your time', holdUntil: release.promise });
    const inFlight = fetch(`${cluster.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'slow-model', messages: [{ role: 'user', content: 'take your time' }] }),
    });
    await upstream.arrived();
    const exited = once(cluster.primary, 'exit');
    cluster.primary.kill('SIGTERM');
    await cluster.printed(/SIGTERM: stopping 2 worker\(s\)/);
    await eventually(() => (cluster.output().match(/shutting down: draining/g)?.length ?? 0) >= 2, 'both workers to drain', { timeoutMs: 30_000 });
    release.resolve();
    const response = await inFlight;
    t.equal(response.status, 200, 'the in-flight call completed');
    const [code] = (await exited) as [number];
    t.equal(code, 0, `exit code (output: ${cluster.output().slice(-800)})`);
  });
});
