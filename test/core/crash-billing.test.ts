import t, { type Test } from 'tap';
import { once } from 'node:events';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createPgDatabase } from '../../adapters/pg/pg-database.ts';
import { createPgliteDatabase } from '../../adapters/pglite/pglite-database.ts';
import { usdToMicros } from '../../core/vocabulary/money.ts';
import type { Database } from '../../core/ports/database.ts';
import { generateToken, SESSION_PREFIX } from '../../core/identity/api-tokens.ts';
import { startFakeOpenAIUpstream } from '../fakes/fake-openai-upstream.ts';
import { dropSchema, randomSchemaName, testPgUrl } from '../helpers/databases.ts';
import { TEST_PRICES } from '../helpers/gateway.ts';
import { type ServiceProcess as Gateway, startServiceProcess as startGateway, stopServiceProcess as stopGateway } from '../helpers/service-process.ts';

/**
 * The gateway is killed with SIGKILL under load (JSON and streamed calls, some of them mid-stream),
 * five times over on the same data, and started again after each kill: every call the upstream
 * answered must be in the request log and charged, every call whose answer reached its client
 * billed by its own row, and the balance must equal the opening credit less the logged costs,
 * exactly. A kill lands wherever the load happens to be when the upstream receives its n-th call:
 * calls in flight are then in every stage, from admitted to answered and about to be settled.
 */

// Six gateway starts per database (PGlite's first one runs initdb): slow on a busy two-core machine.
t.setTimeout(900_000);

const OPENING_CREDIT_USD = 100;
const WORKERS = 12;
const KILLS = 5;
/** Each kill comes when the upstream receives this many more calls. */
const CALLS_PER_KILL = 150;
/** Upper bound on calls per worker, should the kill never come. */
const MAX_CALLS_PER_WORKER = 2_000;

interface Call {
  stream: boolean;
  /** The gateway's x-request-id, known once the status line arrived. */
  id: string | null;
  status: number | null;
  completed: boolean;
}

/**
 * WORKERS clients call in a loop, alternating JSON and streamed calls, until the gateway dies; it
 * is killed the moment `killWhen` resolves (an event: the upstream received its n-th call).
 */
async function loadUntilKilled(gateway: Gateway, key: string, killWhen: Promise<unknown>): Promise<Call[]> {
  const calls: Call[] = [];
  let killed = false;
  const exited = once(gateway.child, 'exit');
  const kill = () => {
    if (killed) return;
    killed = true;
    gateway.child.kill('SIGKILL');
  };
  void killWhen.then(kill);
  const worker = async (w: number) => {
    for (let i = 0; i < MAX_CALLS_PER_WORKER && !killed; i += 1) {
      const call: Call = { stream: (i + w) % 2 === 0, id: null, status: null, completed: false };
      calls.push(call);
      try {
        const response = await fetch(`${gateway.url}/v1/chat/completions`, {
          method: 'POST',
          headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
          body: JSON.stringify({ model: 'solo', stream: call.stream, messages: [{ role: 'user', content: `call ${w}.${i}: tell me something` }] }),
        });
        call.id = response.headers.get('x-request-id');
        call.status = response.status;
        await response.text();
        call.completed = true;
      } catch {
        // The gateway died under this call.
      }
    }
  };
  await Promise.all(Array.from({ length: WORKERS }, (_, w) => worker(w)));
  kill();
  await exited;
  return calls;
}

interface Backend {
  name: string;
  storage(): string;
  /** Opens the database the gateway used, given its SVC_DATA_DIR. */
  open(dataDir: string): Promise<Database>;
  cleanup(): Promise<void>;
}

function pgliteBackend(): Backend {
  return {
    name: 'PGlite on disk',
    // SVC_DATA_DIR puts it in <data>/pglite.
    storage: () => '{ driver: pglite }',
    open: (data) => createPgliteDatabase({ dataDir: join(data, 'pglite') }),
    cleanup: async () => undefined,
  };
}

function postgresBackend(url: string): Backend {
  const schema = randomSchemaName();
  return {
    name: 'PostgreSQL',
    storage: () => `{ driver: postgres, url: '${url}', schema: ${schema}, poolSize: 5 }`,
    open: () => createPgDatabase({ url, schema, poolSize: 2 }),
    cleanup: () => dropSchema(url, schema),
  };
}

async function crashAndRecover(t: Test, backend: Backend): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'svc-crash-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  t.teardown(() => backend.cleanup());
  // Records every call it receives (and answers at once): what the upstream answered.
  const upstream = await startFakeOpenAIUpstream({ defaultReply: { content: 'one two three four five six seven eight nine ten', chunkDelayMs: 15 } });
  t.teardown(() => upstream.close());
  const configPath = join(dir, 'config.yaml');
  writeFileSync(
    configPath,
    `server: { logLevel: info, shutdownGraceMs: 10000 }
storage:
  database: ${backend.storage()}
plugins:
  account: {}
  projects: {}
  keys: {}
  usage: {}
  inference:
    providers: { upstream: { type: openai, baseUrl: '${upstream.baseUrl}', apiKey: sk-test, allowPrivateNetwork: true } }
    models: { solo: { routes: [{ provider: upstream, model: up-solo }], prices: ${JSON.stringify(TEST_PRICES)} } }
  metering:
    initialCreditUsd: ${OPENING_CREDIT_USD}
    limits: { keyDefaults: { requestsPerMinute: 1000000, concurrency: 1000 } }
`,
  );
  const ownerToken = generateToken(SESSION_PREFIX);
  const data = join(dir, 'data');
  let gateway = await startGateway(configPath, data, ownerToken);
  t.teardown(() => stopGateway(gateway, 'SIGKILL'));
  const created = await fetch(`${gateway.url}/client/keys`, {
    method: 'POST',
    headers: { authorization: `Bearer ${ownerToken}`, 'content-type': 'application/json' },
    body: JSON.stringify({ name: 'crash test', scopes: ['inference'] }),
  });
  t.equal(created.status, 201);
  const { key } = (await created.json()) as { key: string };

  const calls: Call[] = [];
  for (let kill = 1; kill <= KILLS; kill += 1) {
    const round = await loadUntilKilled(gateway, key, upstream.arrived(upstream.requests.length + CALLS_PER_KILL));
    calls.push(...round);
    // Start again on the same data: the journal is replayed before the gateway listens.
    gateway = await startGateway(configPath, data, ownerToken);
    const replayed = gateway.log.find((line) => line.includes('billing journal: replayed'));
    t.comment(`kill ${kill}: ${round.length} calls sent; restarted in ${gateway.startMs} ms; replay: ${replayed ?? 'nothing'}`);
  }
  t.equal(await stopGateway(gateway, 'SIGTERM'), 0, 'the gateway restarted after the last kill stops cleanly');

  const started = calls.filter((call) => call.status !== null);
  const midStream = started.filter((call) => call.stream && !call.completed);
  const answeredIds = upstream.requests.map((request) => request.headers['x-client-request-id'] as string);
  t.ok(answeredIds.length >= KILLS * CALLS_PER_KILL, `the upstream answered ${answeredIds.length} calls`);
  t.ok(midStream.length >= 1, `${midStream.length} streams were cut mid-way by the kills`);
  t.same(
    started.filter((call) => call.status !== 200),
    [],
    'every call was served',
  );

  const db = await backend.open(data);
  t.teardown(() => db.close());
  const logged = await db.query<{ id: string; cost_micros: bigint; error_code: string | null; organization_id: string }>(
    'SELECT id, cost_micros, error_code, organization_id FROM request_logs',
  );
  const byId = new Map(logged.rows.map((row) => [row.id, row]));
  t.same(
    answeredIds.filter((id) => !byId.has(id)),
    [],
    'every call the upstream answered is in the request log',
  );
  t.same(
    answeredIds.filter((id) => (byId.get(id)?.cost_micros ?? 0n) <= 0n),
    [],
    'and was charged',
  );
  t.same(
    started.filter((call) => !byId.has(call.id!)).map((call) => call.id),
    [],
    'every call whose response started is in the request log',
  );
  t.same(
    calls.filter((call) => call.completed && byId.get(call.id!)?.error_code !== null).map((call) => call.id),
    [],
    'every call whose client read the whole answer is billed by its own row (its output too)',
  );
  t.same(
    midStream.filter((call) => byId.get(call.id!)?.error_code !== 'gateway_interrupted').map((call) => call.id),
    [],
    'a stream cut by a kill is billed as interrupted',
  );

  const organizationId = logged.rows[0]!.organization_id;
  const totalCost = logged.rows.reduce((sum, row) => sum + row.cost_micros, 0n);
  const balance = await db.query<{ balance_micros: bigint }>('SELECT balance_micros FROM credit_balances WHERE organization_id = $1', [organizationId]);
  t.equal(balance.rows[0]?.balance_micros, usdToMicros(OPENING_CREDIT_USD) - totalCost, 'balance = opening credit − the logged costs, to the micro-dollar');
  const charged = await db.query<{ micros: bigint }>("SELECT coalesce(-sum(amount_micros), 0)::bigint AS micros FROM credit_ledger WHERE organization_id = $1 AND kind = 'ai_usage'", [
    organizationId,
  ]);
  t.equal(charged.rows[0]?.micros, totalCost, 'the ledger’s usage lines cover exactly the logged calls');
  const interrupted = logged.rows.filter((row) => row.error_code === 'gateway_interrupted').length;
  t.comment(
    `${calls.length} calls sent, ${answeredIds.length} answered upstream, ${started.length} started, ${midStream.length} cut mid-stream, ${logged.rows.length} rows logged (${interrupted} as interrupted)`,
  );
}

t.test('a gateway killed under load, five times, bills every call the upstream answered (PGlite on disk)', async (t) => {
  await crashAndRecover(t, pgliteBackend());
});

const pgUrl = testPgUrl();
t.test('a gateway killed under load, five times, bills every call the upstream answered (PostgreSQL)', { skip: pgUrl ? false : 'TEST_PG_URL is not set' }, async (t) => {
  await crashAndRecover(t, postgresBackend(pgUrl!));
});
