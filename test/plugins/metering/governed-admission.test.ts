import { randomUUID } from 'node:crypto';
import Fastify from 'fastify';
import t from 'tap';
import { createMemoryCoordination } from '../../../adapters/memory/memory-coordination.ts';
import { coreMigrations } from '../../../adapters/sql/core-migrations.ts';
import { sqlIdentityStores } from '../../../adapters/sql/identity-stores.ts';
import { runMigrations } from '../../../adapters/sql/migrator.ts';
import type { AdmissionRequest, CallOutcome } from '../../../core/gateway/inference-admission.ts';
import type { KeyCredential, SessionCredential } from '../../../core/identity/credential.ts';
import { createOrganizationWithOwner } from '../../../core/identity/identity-admin.ts';
import type { KeyRateLimits, SpendCap } from '../../../core/ports/identity.ts';
import { BudgetAlerts } from '../../../plugins/metering/budget-alerts.ts';
import { CapPolicies } from '../../../plugins/metering/cap-policies.ts';
import { SqlCreditLedger } from '../../../plugins/metering/credit-ledger-store.ts';
import { GovernedAdmission, type GovernanceSettings, type LimitSet } from '../../../plugins/metering/governed-admission.ts';
import { meteringMigrations } from '../../../plugins/metering/metering-migrations.ts';
import { priceSheet } from '../../../plugins/metering/pricing.ts';
import { RequestLogWriter } from '../../../plugins/metering/request-log-writer.ts';
import { SqlUsageRecorder } from '../../../plugins/metering/usage-recorder.ts';
import { databaseBackends } from '../../helpers/databases.ts';
import { jobKit, testClock } from '../../helpers/jobs.ts';
import { SqlSpendReader } from '../../../plugins/metering/spend-reader.ts';
// The gateway's codes (upstream_error, guardrail_blocked) are catalogued by the inference plugin, which
// metering always runs beside: a row's error code is stored only when it is a catalogued one.
import '../../../plugins/inference/inference-errors.ts';

// GovernedAdmission on its own, without a gateway: over the memory coordination adapter and one PGlite
// database for the whole file (each test its own organisation). It judges the module's mutants
// (mutation/groups.mjs, group ledger-admission); the gateway-level tests (admission.test.ts and others)
// check the same rules through HTTP.

const silent = Fastify({ logger: false }).log;
/** One input token costs 1 µ$, one output token 2 µ$. */
const PRICES = new Map([['priced', priceSheet('priced', { inputPerMTokUsd: 1, cachedInputPerMTokUsd: 0.5, outputPerMTokUsd: 2 })]]);
const NO_LIMITS: LimitSet = { requestsPerMinute: null, tokensPerMinute: null, concurrency: null };

const pglite = databaseBackends().find((backend) => backend.name === 'pglite')!;

t.test('GovernedAdmission', async (t) => {
  const { db, cleanup } = await pglite.create();
  t.teardown(cleanup);
  await runMigrations(db, [...coreMigrations, ...meteringMigrations]);
  const clock = testClock('2026-03-02T10:00:00.000Z');
  const { events } = await jobKit(db, { clock });
  const stores = sqlIdentityStores(db);
  const ledger = new SqlCreditLedger(db);
  let organizations = 0;

  /** A fresh organisation, its project, and an admission over them with the given settings. */
  async function setUp(settings: Partial<GovernanceSettings> = {}, options: { requestLogging?: boolean } = {}) {
    organizations += 1;
    const { organization, project } = await createOrganizationWithOwner(db, sqlIdentityStores, {
      name: `Org ${organizations}`,
      ownerEmail: `owner${organizations}@admission.test`,
      ownerName: 'Owner',
    });
    if (options.requestLogging !== undefined) await stores.organizations.update(organization.id, { requestLogging: options.requestLogging });
    const writer = new RequestLogWriter(new SqlUsageRecorder(db), { flushIntervalMs: 100, batchSize: 500, maxQueue: 20_000 }, silent, null);
    const rejected: string[] = [];
    const charged: Array<[string, bigint]> = [];
    const admission = new GovernedAdmission({
      coordination: createMemoryCoordination(),
      ledger,
      spend: new SqlSpendReader(db),
      policies: new CapPolicies(stores, 60_000),
      writer,
      alerts: new BudgetAlerts(db, events),
      prices: PRICES,
      clock,
      logger: silent,
      onRejected: (kind) => void rejected.push(kind),
      onCharged: (model, micros) => void charged.push([model, micros]),
      settings: {
        keyDefaults: NO_LIMITS,
        project: NO_LIMITS,
        account: NO_LIMITS,
        leaseTtlMs: 60_000,
        counterTtlMs: 60_000,
        initialCreditMicros: 1_000_000n,
        ...settings,
      },
    });
    const session: SessionCredential = {
      kind: 'session',
      sessionId: randomUUID(),
      personId: randomUUID(),
      email: 'owner@admission.test',
      organizationId: organization.id,
      role: 'owner',
      scopes: new Set(),
      csrfTokenHash: null,
    };
    const key = (limits: Partial<KeyRateLimits> = {}, spendCap: SpendCap | null = null, ancestors: KeyCredential['ancestors'] = []): KeyCredential => ({
      kind: 'key',
      keyId: randomUUID(),
      keyName: 'test',
      organizationId: organization.id,
      projectId: project.id,
      appId: null,
      scopes: new Set(),
      modelAllowList: null,
      expiresAt: null,
      spendCap,
      rateLimits: { ...NO_LIMITS, ...limits },
      ancestors,
    });
    /** Rows the writer stored, with what the ledger was charged for them. */
    const stored = async () => {
      await admission.idle();
      await writer.flush();
      const { rows } = await db.query<{
        id: string;
        status_code: number;
        error_code: string | null;
        cost_micros: bigint;
        input_tokens: number;
        output_tokens: number;
        key_id: string | null;
        project_id: string | null;
      }>('SELECT id, status_code, error_code, cost_micros, input_tokens, output_tokens, key_id, project_id FROM request_logs WHERE organization_id = $1 ORDER BY created_at, id', [
        organization.id,
      ]);
      return rows;
    };
    return { admission, writer, session, key, organization, project, rejected, charged, stored };
  }

  const request = (credential: AdmissionRequest['credential'], overrides: Partial<AdmissionRequest> = {}): AdmissionRequest => ({
    credential,
    requestId: randomUUID(),
    endpoint: '/v1/chat/completions',
    model: 'priced',
    stream: false,
    estimate: { inputTokens: 10, maxOutputTokens: 20 },
    countedInputTokens: 10,
    ...overrides,
  });
  const served = (inputTokens: number, outputTokens: number): CallOutcome => ({
    status: 200,
    errorCode: null,
    usage: { inputTokens, outputTokens, cachedInputTokens: 0, cacheWriteTokens: 0, reasoningTokens: 0, estimated: false },
    provider: 'fake',
    upstreamModel: 'upstream-priced',
    attempts: 1,
    latencyMs: 5,
    ttftMs: null,
  });

  t.test('a model without prices is refused before anything is taken', async (t) => {
    const { admission, session } = await setUp();
    await t.rejects(admission.admit(request(session, { model: 'unpriced' })), { code: 'model_not_priced', message: 'Model unpriced has no prices; refusing to serve it unmetered' });
  });

  t.test('an admitted call is charged its real cost once it finishes, and its row records the call', async (t) => {
    const { admission, session, organization, charged, stored } = await setUp();
    const call = request(session);
    const admitted = await admission.admit(call);
    admitted.finish(served(100, 50));
    admitted.finish(served(1_000, 1_000));
    const rows = await stored();
    t.same(
      rows.map((row) => [row.id, row.status_code, row.cost_micros, row.input_tokens, row.output_tokens, row.key_id, row.project_id]),
      [[call.requestId, 200, 200n, 100, 50, null, null]],
      'one row: finishing twice changes nothing',
    );
    t.same(charged, [['priced', 200n]]);
    t.equal(await ledger.balance(organization.id), 1_000_000n - 200n, 'the opening credit less the cost');
  });

  t.test("a key's call is logged under its key and project", async (t) => {
    const { admission, key, project, stored } = await setUp();
    const credential = key();
    (await admission.admit(request(credential))).finish(served(1, 1));
    t.match(await stored(), [{ key_id: credential.keyId, project_id: project.id, cost_micros: 3n }]);
  });

  t.test('a call without usage costs nothing', async (t) => {
    const { admission, session, stored } = await setUp();
    (await admission.admit(request(session))).finish({ ...served(0, 0), usage: null, status: 502, errorCode: 'upstream_error' });
    t.match(await stored(), [{ status_code: 502, error_code: 'upstream_error', cost_micros: 0n, input_tokens: 0 }]);
  });

  t.test('a call is admitted while credit is left (reserving at most what is left); once it is used up, 402 insufficient_credit', async (t) => {
    const { admission, session, rejected } = await setUp({ initialCreditMicros: 100n });
    (await admission.admit(request(session))).finish(served(10, 20));
    // 50 µ$ left: a call that may cost 130 µ$ is admitted and reserves the 50 µ$.
    const larger = await admission.admit(request(session, { estimate: { inputTokens: 10, maxOutputTokens: 60 } }));
    await t.rejects(admission.admit(request(session, { estimate: { inputTokens: 1, maxOutputTokens: 0 } })), { code: 'insufficient_credit', status: 402 }, 'nothing left while it runs');
    t.same(rejected, ['credit']);
    larger.finish(served(10, 10));
    (await admission.admit(request(session, { estimate: { inputTokens: 1, maxOutputTokens: 0 } }))).finish(served(10, 10));
    await t.rejects(admission.admit(request(session)), { code: 'insufficient_credit' }, 'all 100 µ$ spent');
  });

  t.test('what a call reserved beyond its cost is given back when it finishes', async (t) => {
    const { admission, session } = await setUp({ initialCreditMicros: 100n });
    const big = { estimate: { inputTokens: 10, maxOutputTokens: 45 } };
    const first = await admission.admit(request(session, big));
    await t.rejects(admission.admit(request(session, big)), { code: 'insufficient_credit' }, 'the reservation holds 100 µ$');
    first.finish(served(1, 0));
    const second = await admission.admit(request(session, { estimate: { inputTokens: 10, maxOutputTokens: 44 } }));
    second.finish(served(1, 0));
  });

  t.test('requests per minute: the call past the limit gets 429 with retry-after and the rate headers', async (t) => {
    const { admission, key, rejected } = await setUp();
    const credential = key({ requestsPerMinute: 2 });
    const first = await admission.admit(request(credential));
    t.match(first.headers, { 'x-ratelimit-limit-requests': '2', 'x-ratelimit-remaining-requests': '1' });
    first.finish(served(1, 1));
    (await admission.admit(request(credential))).finish(served(1, 1));
    const refused = await admission.admit(request(credential)).catch((error: unknown) => error);
    t.match(refused, { code: 'rate_limit_exceeded', status: 429, message: /Too many requests per minute/ });
    t.match((refused as { headers: Record<string, string> }).headers, { 'retry-after': /^[1-9][0-9]*$/, 'x-ratelimit-limit-requests': '2', 'x-ratelimit-remaining-requests': '0' });
    t.same(rejected, ['requests']);
    t.match(await admission.peekHeaders(credential), { 'x-ratelimit-remaining-requests': '0' }, 'peekHeaders reads the same bucket');
  });

  t.test("the project's and the account's request limits apply to every key and session", async (t) => {
    const project = await setUp({ project: { requestsPerMinute: 1, tokensPerMinute: null, concurrency: null } });
    (await project.admission.admit(request(project.key()))).finish(served(1, 1));
    await t.rejects(project.admission.admit(request(project.key())), { code: 'rate_limit_exceeded' }, "another key of the project shares the project's limit");
    const account = await setUp({ account: { requestsPerMinute: 1, tokensPerMinute: null, concurrency: null } });
    (await account.admission.admit(request(account.session))).finish(served(1, 1));
    await t.rejects(account.admission.admit(request(account.key())), { code: 'rate_limit_exceeded' }, "a key shares its account's limit with the session");
  });

  t.test("a key without limits of its own gets the operator's defaults for keys", async (t) => {
    const { admission, key } = await setUp({ keyDefaults: { requestsPerMinute: 1, tokensPerMinute: null, concurrency: null } });
    const credential = key();
    (await admission.admit(request(credential))).finish(served(1, 1));
    await t.rejects(admission.admit(request(credential)), { code: 'rate_limit_exceeded' });
    const own = key({ requestsPerMinute: 5 });
    for (let i = 0; i < 5; i += 1) (await admission.admit(request(own))).finish(served(1, 1));
    await t.rejects(admission.admit(request(own)), { code: 'rate_limit_exceeded' }, 'its own limit replaces the default');
  });

  t.test('concurrency: a call past the limit waits for one to finish', async (t) => {
    const { admission, key, rejected } = await setUp();
    const credential = key({ concurrency: 1 });
    const first = await admission.admit(request(credential));
    await t.rejects(admission.admit(request(credential)), {
      code: 'rate_limit_exceeded',
      message: 'Too many requests in flight at once for this key, project or account',
      headers: { 'retry-after': '1' },
    });
    t.same(rejected, ['concurrency']);
    first.finish(served(1, 1));
    (await admission.admit(request(credential))).finish(served(1, 1));
  });

  t.test("a maker's limits bound the calls of every key it made", async (t) => {
    const { admission, key } = await setUp();
    const maker = key({ concurrency: 1 });
    const child = key({}, null, [{ keyId: maker.keyId, spendCap: null, rateLimits: maker.rateLimits }]);
    const sibling = key({}, null, [{ keyId: maker.keyId, spendCap: null, rateLimits: maker.rateLimits }]);
    const held = await admission.admit(request(child));
    await t.rejects(admission.admit(request(sibling)), { code: 'rate_limit_exceeded' });
    held.finish(served(1, 1));
  });

  t.test('tokens per minute: a call larger than the limit is told to lower max_tokens; smaller ones wait their turn', async (t) => {
    const { admission, key, rejected } = await setUp();
    const credential = key({ tokensPerMinute: 100 });
    await t.rejects(admission.admit(request(credential, { estimate: { inputTokens: 50, maxOutputTokens: 51 } })), {
      code: 'rate_limit_exceeded',
      message: 'This request may use up to 101 tokens, more than the tokens-per-minute limit allows at once; lower max_tokens',
    });
    const first = await admission.admit(request(credential, { estimate: { inputTokens: 50, maxOutputTokens: 40 } }));
    t.match(first.headers, { 'x-ratelimit-limit-tokens': '100' });
    await t.rejects(admission.admit(request(credential, { estimate: { inputTokens: 10, maxOutputTokens: 10 } })), {
      code: 'rate_limit_exceeded',
      message: 'Too many tokens per minute for this key, project or account; retry after the time in retry-after',
    });
    t.same(rejected, ['tokens', 'tokens']);
    first.finish(served(5, 5));
    (await admission.admit(request(credential, { estimate: { inputTokens: 10, maxOutputTokens: 10 } }))).finish(served(1, 1));
  });

  t.test('a blocking spend cap refuses the call that could pass it, saying what is left', async (t) => {
    const { admission, key, rejected } = await setUp();
    const credential = key({}, { limitMicros: 100n, period: 'day', mode: 'blocking' });
    (await admission.admit(request(credential))).finish(served(10, 20));
    // 50 µ$ spent; a call that may cost 130 µ$ does not fit the 50 µ$ left.
    await t.rejects(admission.admit(request(credential, { estimate: { inputTokens: 10, maxOutputTokens: 60 } })), {
      code: 'budget_exceeded',
      status: 402,
      message:
        'The key spend cap of $0.0001 per day is used up for a request of this size: $0.00005 is left, and this request may cost up to $0.00013; lower max_tokens. GET /client/budget shows every cap.',
    });
    t.same(rejected, ['budget']);
    (await admission.admit(request(credential))).finish(served(10, 20));
    await t.rejects(admission.admit(request(credential, { estimate: { inputTokens: 1, maxOutputTokens: 0 } })), {
      code: 'budget_exceeded',
      message: 'The key spend cap of $0.0001 per day is used up. GET /client/budget shows every cap.',
    });
  });

  t.test("a maker's spend cap counts what the keys it made spend", async (t) => {
    const { admission, key } = await setUp();
    const cap: SpendCap = { limitMicros: 60n, period: 'month', mode: 'blocking' };
    const maker = key({}, cap);
    const child = key({}, null, [{ keyId: maker.keyId, spendCap: cap, rateLimits: maker.rateLimits }]);
    (await admission.admit(request(child))).finish(served(10, 20));
    await t.rejects(admission.admit(request(child)), { code: 'budget_exceeded', message: /The key spend cap of \$0.00006 per month/ });
  });

  t.test('an alert-only cap never refuses, and records one alert once spending reaches it', async (t) => {
    const { admission, key, organization } = await setUp();
    const credential = key({}, { limitMicros: 40n, period: 'day', mode: 'alert' });
    const alerts = async () => (await db.query('SELECT scope, spent_micros FROM budget_alerts WHERE organization_id = $1', [organization.id])).rows;
    (await admission.admit(request(credential))).finish(served(10, 10));
    await admission.idle();
    t.same(await alerts(), [], '30 µ$ is under the cap');
    (await admission.admit(request(credential))).finish(served(10, 10));
    await admission.idle();
    (await admission.admit(request(credential))).finish(served(10, 10));
    await admission.idle();
    t.same(
      (await alerts()).map((row) => [row['scope'], row['spent_micros']]),
      [['key', 60n]],
      'one alert, from the call that took spending past 40 µ$; none for the next',
    );
  });

  t.test('logBodies follows the account; bodies are stored only where it is on', async (t) => {
    const bodies = { request: { prompt: 'hi' }, response: { text: 'hello' } };
    const off = await setUp({}, { requestLogging: false });
    const quiet = await off.admission.admit(request(off.session));
    t.equal(quiet.logBodies, false);
    quiet.finish({ ...served(1, 1), bodies });
    const on = await setUp({}, { requestLogging: true });
    const loud = await on.admission.admit(request(on.session));
    t.equal(loud.logBodies, true);
    loud.finish({ ...served(1, 1), bodies });
    const [offRow] = await off.stored();
    const [onRow] = await on.stored();
    const kept = async (id: string) => (await db.query('SELECT count(*)::int AS n FROM request_log_bodies WHERE request_id = $1', [id])).rows[0]?.['n'];
    t.same([await kept(offRow!.id), await kept(onRow!.id)], [0, 1]);
  });

  t.test('a call refused before admission is logged with its status and costs nothing', async (t) => {
    const { admission, key, stored } = await setUp();
    const credential = key();
    admission.refused({ credential, requestId: 'refused-1', endpoint: '/v1/chat/completions', model: 'priced', status: 400, errorCode: 'guardrail_blocked' });
    t.match(await stored(), [{ id: 'refused-1', status_code: 400, error_code: 'guardrail_blocked', cost_micros: 0n, key_id: credential.keyId }]);
  });

  t.test('idle() waits for admitted calls to finish', async (t) => {
    const { admission, session } = await setUp();
    const admitted = await admission.admit(request(session));
    let idle = false;
    const waiting = admission.idle().then(() => (idle = true));
    await new Promise((resolve) => setImmediate(resolve));
    t.equal(idle, false, 'not while a call runs');
    admitted.finish(served(1, 1));
    await waiting;
    t.equal(idle, true);
  });
});
