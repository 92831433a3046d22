import t from 'tap';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createPgDatabase } from '../../../adapters/pg/pg-database.ts';
import { generateToken, SESSION_PREFIX } from '../../../core/identity/api-tokens.ts';
import { usdToMicros } from '../../../core/vocabulary/money.ts';
import { startFakeOpenAIUpstream } from '../../fakes/fake-openai-upstream.ts';
import { chatLine } from '../../helpers/batches.ts';
import { dropSchema, randomSchemaName, testPgUrl } from '../../helpers/databases.ts';
import { eventually } from '../../helpers/eventually.ts';
import { TEST_PRICES } from '../../helpers/gateway.ts';
import { startServiceProcess, stopServiceProcess } from '../../helpers/service-process.ts';

// Two service starts and a lease expiry (the dead worker's line jobs wait out their 30 s lease).
t.setTimeout(600_000);

const OPENING_CREDIT_USD = 100;
const LINES = 300;
/** The kill comes when the upstream has received this many calls: mid-batch. */
const KILL_AFTER = 100;

const pgUrl = testPgUrl();

t.test('a worker killed mid-batch on PostgreSQL: the batch completes after restart, no line recorded or billed twice', { skip: pgUrl ? false : 'TEST_PG_URL is not set' }, async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'svc-batch-crash-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const schema = randomSchemaName();
  t.teardown(() => dropSchema(pgUrl!, schema));
  // Each answer takes a little while, so the kill finds lines in every stage.
  const upstream = await startFakeOpenAIUpstream({ defaultReply: { delayMs: 15 } });
  t.teardown(() => upstream.close());
  const configPath = join(dir, 'config.yaml');
  writeFileSync(
    configPath,
    `server: { logLevel: info, shutdownGraceMs: 10000 }
storage:
  database: { driver: postgres, url: '${pgUrl}', schema: ${schema}, poolSize: 5 }
plugins:
  account: {}
  projects: {}
  keys: {}
  usage: {}
  files: {}
  batches: { holdReleaseDelayMs: 0, lineConcurrency: 8, perOrganizationConcurrency: 8 }
  inference:
    providers: { upstream: { type: openai, baseUrl: '${upstream.baseUrl}', apiKey: sk-test, allowPrivateNetwork: true } }
    models: { solo: { batch: true, routes: [{ provider: upstream, model: up-solo }], prices: ${JSON.stringify(TEST_PRICES)} } }
  metering:
    initialCreditUsd: ${OPENING_CREDIT_USD}
`,
  );
  const ownerToken = generateToken(SESSION_PREFIX);
  const data = join(dir, 'data');
  let service = await startServiceProcess(configPath, data, ownerToken);
  t.teardown(() => stopServiceProcess(service, 'SIGKILL'));
  const created = await fetch(`${service.url}/client/keys`, {
    method: 'POST',
    headers: { authorization: `Bearer ${ownerToken}`, 'content-type': 'application/json' },
    body: JSON.stringify({ name: 'batch crash test', scopes: ['inference'] }),
  });
  const { key } = (await created.json()) as { key: string };
  const auth = { authorization: `Bearer ${key}` };

  const form = new FormData();
  form.append('purpose', 'batch');
  const jsonl = Array.from({ length: LINES }, (_, i) => JSON.stringify(chatLine(`line-${i + 1}`))).join('\n');
  form.append('file', new Blob([jsonl]), 'batch.jsonl');
  const file = (await (await fetch(`${service.url}/v1/files`, { method: 'POST', headers: auth, body: form })).json()) as { id: string };
  const submitted = await fetch(`${service.url}/v1/batches`, {
    method: 'POST',
    headers: { ...auth, 'content-type': 'application/json' },
    body: JSON.stringify({ input_file_id: file.id, endpoint: '/v1/chat/completions', completion_window: '24h' }),
  });
  t.equal(submitted.status, 200);
  const batchId = ((await submitted.json()) as { id: string }).id;

  await upstream.arrived(KILL_AFTER);
  await stopServiceProcess(service, 'SIGKILL');
  service = await startServiceProcess(configPath, data, ownerToken);

  const batch = await eventually(
    async () => {
      const answer = (await (await fetch(`${service.url}/v1/batches/${batchId}`, { headers: auth })).json()) as Record<string, any>;
      return answer.status === 'completed' ? answer : null;
    },
    'the batch to complete after the restart',
    { timeoutMs: 300_000, everyMs: 250 },
  );
  t.same(batch.request_counts, { total: LINES, completed: LINES, failed: 0 }, 'every line recorded once');
  const output = (await (await fetch(`${service.url}/v1/batches/${batchId}/content`, { headers: auth })).text()).split('\n').filter(Boolean);
  t.equal(output.length, LINES, 'one output line per input line');
  t.equal(new Set(output.map((line) => JSON.parse(line).custom_id)).size, LINES);
  t.ok(upstream.requests.length >= LINES, `the upstream received ${upstream.requests.length} calls (a line cut off by the kill may be sent again)`);
  t.equal(await stopServiceProcess(service, 'SIGTERM'), 0);

  const db = await createPgDatabase({ url: pgUrl!, schema, poolSize: 2 });
  t.teardown(() => db.close());
  const rows = await db.query<{ id: string; cost_micros: bigint; organization_id: string }>('SELECT id, cost_micros, organization_id FROM request_logs WHERE batch_id = $1', [batchId]);
  t.equal(rows.rows.length, LINES, 'one request-log row per line: none billed twice');
  t.ok(
    rows.rows.every((row) => row.cost_micros > 0n),
    'every line was billed',
  );
  const organizationId = rows.rows[0]!.organization_id;
  const all = await db.query<{ micros: bigint }>('SELECT coalesce(sum(cost_micros), 0)::bigint AS micros FROM request_logs WHERE organization_id = $1', [organizationId]);
  const charged = await db.query<{ micros: bigint }>("SELECT coalesce(-sum(amount_micros), 0)::bigint AS micros FROM credit_ledger WHERE organization_id = $1 AND kind = 'ai_usage'", [
    organizationId,
  ]);
  t.equal(charged.rows[0]?.micros, all.rows[0]?.micros, "the ledger's usage lines equal the sum of the lines' costs");
  const balance = await db.query<{ balance_micros: bigint }>('SELECT balance_micros FROM credit_balances WHERE organization_id = $1', [organizationId]);
  t.equal(balance.rows[0]?.balance_micros, usdToMicros(OPENING_CREDIT_USD) - all.rows[0]!.micros, 'balance = opening credit − the lines’ costs');
  const open = await db.query<{ n: number }>('SELECT count(*)::int AS n FROM spend_holds WHERE released_at IS NULL');
  t.equal(open.rows[0]?.n, 0, "the batch's hold was released");
});
