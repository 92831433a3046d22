import { randomUUID } from 'node:crypto';
import t, { type Test } from 'tap';
import { Tokens } from '../../core/kernel/di-tokens.ts';
import { addPerson, buildTestApp, createKey } from '../helpers/app.ts';

// Routes read the time through the injected clock; tests that depend on "now" move it.
let now = new Date('2026-06-01T00:00:00Z');
const clock = () => now;
const test = await buildTestApp(t, { clock });
const db = test.app.svc.container.resolve(Tokens.Database);

type Json = Record<string, any>;

interface Scenario {
  projectId: string;
  keyId: string;
  /** A key of this project holding `usage:read` (plus what was asked). */
  token: string;
}

/** A fresh project and a reader key in it: the key sees this project's rows only, so subtests do not mix. */
async function scenario(scopes: string[] = ['usage:read']): Promise<Scenario> {
  const created = await test.call('POST', '/client/projects', { body: { name: `usage ${randomUUID()}` } });
  if (created.statusCode !== 201) throw new Error(`project: ${created.body}`);
  const projectId = (created.json() as Json).id as string;
  const key = await createKey(test, { name: 'reader', projectId, scopes });
  return { projectId, keyId: key.id, token: key.key };
}

interface Fixture {
  at: string;
  id?: string;
  keyId?: string | null;
  projectId?: string | null;
  endpoint?: string;
  model?: string | null;
  provider?: string | null;
  upstreamModel?: string | null;
  status?: number;
  errorCode?: string | null;
  input?: number;
  cached?: number;
  cacheWrite?: number;
  output?: number;
  reasoning?: number;
  estimated?: boolean;
  costMicros?: number;
  latencyMs?: number;
  ttftMs?: number | null;
  streamed?: boolean;
  attempts?: number;
  priceVersion?: string | null;
  webSearches?: number;
  images?: { count: number; size: string; quality: string | null };
  characters?: number;
  audioSeconds?: number;
  unitsCostMicros?: number;
}

/** The units of a report, a series bucket or a row that used none besides tokens. */
const NO_UNITS = { webSearches: 0, images: 0, characters: 0, audioSeconds: 0, costUsd: 0 };
const NO_ROW_UNITS = { ...NO_UNITS, images: null };

/** Inserts one request_logs row of the scenario; returns its id. */
async function insert(s: Scenario, f: Fixture): Promise<string> {
  const id = f.id ?? `req_${randomUUID().replaceAll('-', '')}`;
  await db.query(
    `INSERT INTO request_logs (id, organization_id, project_id, key_id, endpoint, model, provider, upstream_model, status_code, error_code,
       input_tokens, cached_input_tokens, cache_write_tokens, output_tokens, reasoning_tokens, usage_estimated,
       cost_micros, latency_ms, ttft_ms, streamed, attempts, created_at, price_version,
       web_searches, images, image_size, image_quality, characters, audio_seconds, units_cost_micros)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22::timestamptz, $23,
       $24, $25, $26, $27, $28, $29, $30)`,
    [
      id,
      test.organizationId,
      f.projectId === undefined ? s.projectId : f.projectId,
      f.keyId === undefined ? s.keyId : f.keyId,
      f.endpoint ?? '/v1/chat/completions',
      f.model === undefined ? 'gpt-test' : f.model,
      f.provider === undefined ? 'primary' : f.provider,
      f.upstreamModel === undefined ? null : f.upstreamModel,
      f.status ?? 200,
      f.errorCode ?? null,
      f.input ?? 0,
      f.cached ?? 0,
      f.cacheWrite ?? 0,
      f.output ?? 0,
      f.reasoning ?? 0,
      f.estimated ?? false,
      BigInt(f.costMicros ?? 0),
      f.latencyMs ?? 100,
      f.ttftMs ?? null,
      f.streamed ?? false,
      f.attempts ?? 1,
      f.at,
      f.priceVersion ?? null,
      f.webSearches ?? 0,
      f.images?.count ?? 0,
      f.images?.size ?? null,
      f.images?.quality ?? null,
      f.characters ?? 0,
      f.audioSeconds ?? 0,
      BigInt(f.unitsCostMicros ?? 0),
    ],
  );
  return id;
}

async function storeBodies(id: string, request: unknown, response: unknown): Promise<void> {
  await db.query('INSERT INTO request_log_bodies (request_id, request_body, response_body) VALUES ($1, $2::jsonb, $3::jsonb)', [id, JSON.stringify(request), JSON.stringify(response)]);
}

async function get(token: string, path: string): Promise<{ status: number; body: Json }> {
  const response = await test.call('GET', `/client${path}`, { token });
  return { status: response.statusCode, body: response.json() as Json };
}

/** GET that must answer 200. */
async function ok(token: string, path: string): Promise<Json> {
  const { status, body } = await get(token, path);
  if (status !== 200) throw new Error(`GET ${path}: ${status} ${JSON.stringify(body)}`);
  return body;
}

const ids = (body: Json): string[] => (body.data as Json[]).map((row) => row.id as string);

async function expect400(tt: Test, token: string, path: string, param: string): Promise<void> {
  const { status, body } = await get(token, path);
  tt.equal(status, 400, `${path} answers 400`);
  tt.equal(body.error?.param, param, `${path} names ${param}`);
}

async function addMember(projectId: string, role: 'admin' | 'developer' | 'viewer'): Promise<string> {
  const person = await addPerson(test, { role: 'member' });
  const added = await test.call('POST', `/client/projects/${projectId}/members`, { body: { personId: person.personId, role } });
  if (added.statusCode !== 201) throw new Error(`member: ${added.body}`);
  return person.token;
}

// ---------------------------------------------------------------------------------------------
// GET /usage

t.test('usage: headline totals, per-model breakdown and recent requests for a window', async (t) => {
  const s = await scenario();
  await insert(s, { at: '2026-01-05T01:00:00Z', model: 'big', input: 100, cached: 10, cacheWrite: 5, output: 50, reasoning: 7, costMicros: 2_500_000, latencyMs: 100 });
  await insert(s, { at: '2026-01-05T02:00:00Z', model: 'big', input: 200, output: 20, costMicros: 1_000_000, latencyMs: 200 });
  await insert(s, { at: '2026-01-05T03:00:00Z', model: 'small', input: 10, output: 1, costMicros: 1, latencyMs: 300, status: 502, errorCode: 'upstream_error' });
  await insert(s, { at: '2026-01-05T04:00:00Z', model: 'small', input: 20, output: 2, costMicros: 2, latencyMs: 400, status: 429 });
  const newest = await insert(s, { at: '2026-01-05T05:00:00Z', model: 'small', input: 30, output: 3, costMicros: 3, latencyMs: 1000 });

  const body = await ok(s.token, '/usage?from=2026-01-05&to=2026-01-06');
  t.equal(body.object, 'usage_report');
  t.equal(body.from, '2026-01-05T00:00:00.000Z');
  t.equal(body.to, '2026-01-06T00:00:00.000Z');
  t.same(body.totals, {
    requests: 5,
    errors: 2,
    tokens: { input: 360, cachedInput: 10, cacheWrite: 5, output: 76, reasoning: 7 },
    units: NO_UNITS,
    costUsd: 3.500006,
    avgLatencyMs: 400,
    p50LatencyMs: 300,
    p95LatencyMs: 1000,
  });
  t.same(
    body.models.map((m: Json) => [m.model, m.requests, m.errors, m.costUsd, m.tokens.input]),
    [
      ['big', 2, 0, 3.5, 300],
      ['small', 3, 2, 0.000006, 60],
    ],
    'per model, costliest first',
  );
  t.equal(body.models[1].p50LatencyMs, 400);
  t.equal(body.recent.length, 5);
  t.equal(body.recent[0].id, newest, 'recent is newest first');
  t.same(
    body.recent.map((r: Json) => r.createdAt),
    [...body.recent.map((r: Json) => r.createdAt)].sort().reverse(),
  );
});

t.test('usage: from is inclusive and to is exclusive', async (t) => {
  const s = await scenario();
  await insert(s, { at: '2026-01-07T00:00:00Z', costMicros: 1 });
  await insert(s, { at: '2026-01-07T23:59:59.999Z', costMicros: 10 });
  await insert(s, { at: '2026-01-08T00:00:00Z', costMicros: 100 });
  await insert(s, { at: '2026-01-06T23:59:59.999Z', costMicros: 1000 });
  const body = await ok(s.token, '/usage?from=2026-01-07&to=2026-01-08');
  t.equal(body.totals.requests, 2);
  t.equal(body.totals.costUsd, 0.000011);
});

t.test('usage: from and to accept ISO timestamps', async (t) => {
  const s = await scenario();
  await insert(s, { at: '2026-01-09T05:59:59Z' });
  await insert(s, { at: '2026-01-09T06:00:00Z' });
  await insert(s, { at: '2026-01-09T07:30:00Z' });
  const body = await ok(s.token, `/usage?from=${encodeURIComponent('2026-01-09T08:00:00+02:00')}&to=2026-01-09T07:30:00Z`);
  t.equal(body.from, '2026-01-09T06:00:00.000Z', 'an offset is honoured');
  t.equal(body.totals.requests, 1);
});

t.test('usage: the window defaults to the last 30 days ending now', async (t) => {
  now = new Date('2026-06-15T12:30:20Z');
  const s = await scenario();
  await insert(s, { at: '2026-06-15T11:00:00Z' });
  await insert(s, { at: '2026-05-17T12:00:00Z' }); // 29 days back
  await insert(s, { at: '2026-05-15T12:00:00Z' }); // 31 days back
  await insert(s, { at: '2026-06-15T12:31:00Z' }); // after now
  const body = await ok(s.token, '/usage');
  t.equal(body.to, now.toISOString());
  t.equal(body.from, new Date(now.getTime() - 30 * 86_400_000).toISOString());
  t.equal(body.totals.requests, 2);
  const onlyTo = await ok(s.token, '/usage?to=2026-05-20');
  t.equal(onlyTo.from, '2026-04-20T00:00:00.000Z', 'from defaults to 30 days before to');
  t.equal(onlyTo.totals.requests, 2);
});

t.test('usage: keyId narrows the report to one key', async (t) => {
  const s = await scenario();
  const other = randomUUID();
  await insert(s, { at: '2026-01-10T01:00:00Z', costMicros: 5 });
  await insert(s, { at: '2026-01-10T02:00:00Z', costMicros: 7, keyId: other });
  await insert(s, { at: '2026-01-10T03:00:00Z', costMicros: 9, keyId: other });
  const body = await ok(s.token, `/usage?from=2026-01-10&to=2026-01-11&keyId=${other}`);
  t.equal(body.keyId, other);
  t.equal(body.totals.requests, 2);
  t.equal(body.totals.costUsd, 0.000016);
  t.ok(body.recent.every((r: Json) => r.keyId === other));
  t.equal((await ok(s.token, '/usage?from=2026-01-10&to=2026-01-11')).totals.requests, 3);
});

t.test('usage: units besides tokens are summed next to them, with their cost, in totals, per model and per bucket', async (t) => {
  const s = await scenario();
  const at = '2026-01-07T02:00:00Z';
  await insert(s, { at, model: 'searcher', input: 100, output: 10, webSearches: 3, costMicros: 30_250, unitsCostMicros: 30_000 });
  await insert(s, { at, model: 'painter', images: { count: 2, size: '1024x1024', quality: 'hd' }, costMicros: 160_000, unitsCostMicros: 160_000 });
  await insert(s, { at, model: 'speaker', characters: 1200, costMicros: 18_000, unitsCostMicros: 18_000 });
  await insert(s, { at, model: 'listener', audioSeconds: 61, costMicros: 6_100, unitsCostMicros: 6_100 });
  const body = await ok(s.token, '/usage?from=2026-01-07&to=2026-01-08');
  t.same(body.totals.units, { webSearches: 3, images: 2, characters: 1200, audioSeconds: 61, costUsd: 0.2141 });
  t.equal(body.totals.costUsd, 0.21435, 'tokens and units together');
  const painter = body.models.find((m: Json) => m.model === 'painter');
  t.same(painter.units, { ...NO_UNITS, images: 2, costUsd: 0.16 }, 'per model');
  const series = await ok(s.token, '/usage/series?from=2026-01-07&to=2026-01-08&granularity=day');
  t.same(series.buckets[0].units, { webSearches: 3, images: 2, characters: 1200, audioSeconds: 61, costUsd: 0.2141 }, 'per bucket');
});

t.test('requests: a row shows the units its call used, images by size and quality', async (t) => {
  const s = await scenario();
  const id = await insert(s, {
    at: '2026-01-08T02:00:00Z',
    endpoint: '/v1/images/generations',
    model: 'painter',
    images: { count: 2, size: '1024x1024', quality: 'hd' },
    costMicros: 160_000,
    unitsCostMicros: 160_000,
  });
  const searched = await insert(s, { at: '2026-01-08T01:00:00Z', endpoint: '/v1/responses', webSearches: 4, input: 10, costMicros: 40_003, unitsCostMicros: 40_000 });
  const list = await ok(s.token, '/requests?from=2026-01-08&to=2026-01-09');
  t.same(list.data[0].units, { ...NO_ROW_UNITS, images: { count: 2, size: '1024x1024', quality: 'hd' }, costUsd: 0.16 });
  t.same(list.data[1].units, { ...NO_ROW_UNITS, webSearches: 4, costUsd: 0.04 });
  t.equal(list.data[1].costUsd, 0.040003, 'the whole cost: tokens and units');
  const detail = await ok(s.token, `/requests/${id}`);
  t.same(detail.units, list.data[0].units, 'the detail shows them too');
  t.equal((await ok(s.token, `/requests/${searched}`)).units.webSearches, 4);
});

t.test('usage: an empty window reports zeros and null latency', async (t) => {
  const s = await scenario();
  const body = await ok(s.token, '/usage?from=2020-01-01&to=2020-01-02');
  t.same(body.totals, {
    requests: 0,
    errors: 0,
    tokens: { input: 0, cachedInput: 0, cacheWrite: 0, output: 0, reasoning: 0 },
    units: NO_UNITS,
    costUsd: 0,
    avgLatencyMs: null,
    p50LatencyMs: null,
    p95LatencyMs: null,
  });
  t.same(body.models, []);
  t.same(body.recent, []);
});

t.test('usage: limit defaults to 100 recent requests and caps the list', async (t) => {
  const s = await scenario();
  for (let i = 0; i < 105; i += 1) await insert(s, { at: new Date(Date.UTC(2026, 0, 11, 0, i)).toISOString() });
  const body = await ok(s.token, '/usage?from=2026-01-11&to=2026-01-12');
  t.equal(body.totals.requests, 105, 'totals count every request');
  t.equal(body.recent.length, 100, 'default limit 100');
  t.equal(body.recent[0].createdAt, '2026-01-11T01:44:00.000Z');
  t.equal((await ok(s.token, '/usage?from=2026-01-11&to=2026-01-12&limit=3')).recent.length, 3);
  t.equal((await ok(s.token, '/usage?from=2026-01-11&to=2026-01-12&limit=1000')).recent.length, 105, 'limit 1000 is allowed');
});

t.test('usage: limit over 1000, zero, or not an integer answers 400 naming limit', async (t) => {
  const s = await scenario();
  for (const bad of ['1001', '0', '-1', '2.5', 'ten', '']) await expect400(t, s.token, `/usage?limit=${bad}`, 'limit');
});

t.test('usage: malformed from, to, keyId answer 400 naming the param; from not before to names from', async (t) => {
  const s = await scenario();
  await expect400(t, s.token, '/usage?from=2026-13-01', 'from');
  await expect400(t, s.token, '/usage?from=yesterday', 'from');
  await expect400(t, s.token, '/usage?to=2026-01-01T25:00:00Z', 'to');
  await expect400(t, s.token, '/usage?keyId=not-a-uuid', 'keyId');
  await expect400(t, s.token, '/usage?from=2026-01-02&to=2026-01-01', 'from');
  await expect400(t, s.token, '/usage?from=2026-01-02&to=2026-01-02', 'from');
});

t.test('dates outside 1970-01-01 to 9999-12-31 (UTC) answer 400 naming the field on every usage and request route', async (t) => {
  const s = await scenario();
  // Year 0, just before 1970, and one that an offset pushes into year 10000: PostgreSQL or PGlite refuse each.
  for (const route of ['/usage', '/usage/series', '/usage/comparison', '/requests']) {
    for (const bad of ['0000-01-01', '1969-12-31T23:59:59Z', '9999-12-31T23:59:59-23:59']) {
      await expect400(t, s.token, `${route}?from=${encodeURIComponent(bad)}`, 'from');
      await expect400(t, s.token, `${route}?to=${encodeURIComponent(bad)}`, 'to');
    }
  }
});

t.test('the edges of the accepted range are served', async (t) => {
  const s = await scenario();
  const report = await get(s.token, '/usage?from=1970-01-01&to=9999-12-31T23:59:59.999Z');
  t.equal(report.status, 200, JSON.stringify(report.body).slice(0, 200));
  t.equal((await get(s.token, '/requests?from=1970-01-01T00:00:00Z&to=9999-12-31')).status, 200);
});

// ---------------------------------------------------------------------------------------------
// GET /usage/series

t.test('series: hourly buckets for a window of two days or less, empty buckets included, newest first', async (t) => {
  const s = await scenario();
  await insert(s, { at: '2026-02-01T03:15:00Z', input: 10, output: 1, costMicros: 100 });
  await insert(s, { at: '2026-02-01T03:45:00Z', input: 20, output: 2, costMicros: 200, status: 500 });
  await insert(s, { at: '2026-02-01T10:00:00Z', input: 5, costMicros: 5 });
  await insert(s, { at: '2026-02-02T00:00:00Z', input: 999 }); // outside: to is exclusive
  const body = await ok(s.token, '/usage/series?from=2026-02-01&to=2026-02-02');
  t.equal(body.object, 'usage_series');
  t.equal(body.granularity, 'hour');
  t.equal(body.buckets.length, 24);
  t.equal(body.buckets[0].start, '2026-02-01T23:00:00.000Z');
  t.equal(body.buckets[23].start, '2026-02-01T00:00:00.000Z');
  const at = (start: string) => body.buckets.find((b: Json) => b.start === start);
  t.same(at('2026-02-01T03:00:00.000Z'), {
    start: '2026-02-01T03:00:00.000Z',
    requests: 2,
    errors: 1,
    tokens: { input: 30, cachedInput: 0, cacheWrite: 0, output: 3, reasoning: 0 },
    units: NO_UNITS,
    costUsd: 0.0003,
  });
  t.equal(at('2026-02-01T10:00:00.000Z').requests, 1);
  t.same(
    at('2026-02-01T04:00:00.000Z'),
    {
      start: '2026-02-01T04:00:00.000Z',
      requests: 0,
      errors: 0,
      tokens: { input: 0, cachedInput: 0, cacheWrite: 0, output: 0, reasoning: 0 },
      units: NO_UNITS,
      costUsd: 0,
    },
    'an empty bucket is present with zeros',
  );
  t.equal(body.buckets.filter((b: Json) => b.requests === 0).length, 22);
});

t.test('series: exactly two days is hourly; longer windows default to daily buckets', async (t) => {
  const s = await scenario();
  await insert(s, { at: '2026-02-03T12:00:00Z', costMicros: 1_000_000 });
  await insert(s, { at: '2026-02-05T23:59:59Z', costMicros: 2_000_000 });
  const twoDays = await ok(s.token, '/usage/series?from=2026-02-03&to=2026-02-05');
  t.equal(twoDays.granularity, 'hour');
  t.equal(twoDays.buckets.length, 48);
  const week = await ok(s.token, '/usage/series?from=2026-02-01&to=2026-02-08');
  t.equal(week.granularity, 'day');
  t.same(
    week.buckets.map((b: Json) => [b.start.slice(0, 10), b.requests, b.costUsd]),
    [
      ['2026-02-07', 0, 0],
      ['2026-02-06', 0, 0],
      ['2026-02-05', 1, 2],
      ['2026-02-04', 0, 0],
      ['2026-02-03', 1, 1],
      ['2026-02-02', 0, 0],
      ['2026-02-01', 0, 0],
    ],
  );
});

t.test('series: granularity overrides the default; a window cut mid-bucket counts only rows inside it', async (t) => {
  const s = await scenario();
  await insert(s, { at: '2026-02-10T10:15:00Z' });
  await insert(s, { at: '2026-02-10T10:45:00Z' });
  await insert(s, { at: '2026-02-10T12:59:00Z' });
  const hours = await ok(s.token, '/usage/series?from=2026-02-10T10:30:00Z&to=2026-02-10T13:00:00Z');
  t.same(
    hours.buckets.map((b: Json) => [b.start, b.requests]),
    [
      ['2026-02-10T12:00:00.000Z', 1],
      ['2026-02-10T11:00:00.000Z', 0],
      ['2026-02-10T10:00:00.000Z', 1],
    ],
  );
  const days = await ok(s.token, '/usage/series?from=2026-02-10&to=2026-02-11&granularity=day');
  t.equal(days.granularity, 'day');
  t.same(
    days.buckets.map((b: Json) => [b.start, b.requests]),
    [['2026-02-10T00:00:00.000Z', 3]],
  );
});

t.test('series: keyId narrows the buckets to one key', async (t) => {
  const s = await scenario();
  const other = randomUUID();
  await insert(s, { at: '2026-02-12T01:00:00Z' });
  await insert(s, { at: '2026-02-12T01:30:00Z', keyId: other });
  const body = await ok(s.token, `/usage/series?from=2026-02-12&to=2026-02-13&keyId=${other}`);
  t.equal(body.keyId, other);
  t.equal(
    body.buckets.reduce((sum: number, b: Json) => sum + b.requests, 0),
    1,
  );
});

t.test('series: projectId narrows the buckets to one project; a project the caller cannot reach answers 404', async (t) => {
  const s = await scenario();
  const other = await scenario();
  await insert(s, { at: '2026-03-20T01:00:00Z', costMicros: 10 });
  await insert(other, { at: '2026-03-20T01:30:00Z', costMicros: 20 });
  await insert(other, { at: '2026-03-20T02:30:00Z', costMicros: 30 });
  const owner = (query: string) => test.call('GET', `/client/usage/series?from=2026-03-20&to=2026-03-21&${query}`).then((r) => r.json() as Json);
  const narrowed = await owner(`projectId=${other.projectId}`);
  t.equal(narrowed.projectId, other.projectId);
  t.same([narrowed.buckets.reduce((sum: number, b: Json) => sum + b.requests, 0), narrowed.buckets.reduce((sum: number, b: Json) => sum + b.costUsd, 0)], [2, 0.00005]);
  const elsewhere = await get(s.token, `/usage/series?from=2026-03-20&to=2026-03-21&projectId=${other.projectId}`);
  t.same([elsewhere.status, elsewhere.body.error.code], [404, 'project_not_found'], "a project key naming another project gets that project's 404");
});

t.test("series: by=model lists each bucket's calls per model, costliest first, adding up to the bucket", async (t) => {
  const s = await scenario();
  await insert(s, { at: '2026-03-22T01:00:00Z', model: 'small', input: 10, costMicros: 100 });
  await insert(s, { at: '2026-03-22T01:10:00Z', model: 'large', input: 20, costMicros: 900 });
  await insert(s, { at: '2026-03-22T01:20:00Z', model: 'small', input: 5, costMicros: 50, status: 500 });
  await insert(s, { at: '2026-03-22T03:00:00Z', model: 'large', input: 1, costMicros: 1 });
  const body = await ok(s.token, '/usage/series?from=2026-03-22T00:00:00Z&to=2026-03-22T04:00:00Z&by=model');
  const at = (hour: string) => body.buckets.find((b: Json) => b.start === `2026-03-22T${hour}:00:00.000Z`);
  t.match(at('01').models, [
    { model: 'large', requests: 1, errors: 0, costUsd: 0.0009, tokens: { input: 20 } },
    { model: 'small', requests: 2, errors: 1, costUsd: 0.00015, tokens: { input: 15 } },
  ]);
  t.equal(at('01').models.length, 2);
  t.same(at('02').models, [], 'an empty bucket lists no model');
  t.same(
    at('03').models.map((m: Json) => m.model),
    ['large'],
  );
  for (const bucket of body.buckets as Json[]) {
    t.equal(
      bucket.models.reduce((sum: number, m: Json) => sum + m.requests, 0),
      bucket.requests,
      `${bucket.start} adds up`,
    );
  }
  const plain = await ok(s.token, '/usage/series?from=2026-03-22T00:00:00Z&to=2026-03-22T04:00:00Z');
  t.notOk('models' in plain.buckets[0], 'without by, buckets carry no models');
});

t.test('usage, comparison and requests: projectId narrows each', async (t) => {
  const s = await scenario();
  const other = await scenario();
  await insert(s, { at: '2026-03-24T01:00:00Z' });
  await insert(other, { at: '2026-03-24T02:00:00Z' });
  const window = 'from=2026-03-24&to=2026-03-25';
  const owner = (path: string) => test.call('GET', `/client${path}`).then((r) => r.json() as Json);
  const report = await owner(`/usage?${window}&projectId=${s.projectId}`);
  t.same([report.projectId, report.totals.requests], [s.projectId, 1]);
  const compared = await owner(`/usage/comparison?${window}&projectId=${other.projectId}`);
  t.same([compared.projectId, compared.current.totals.requests], [other.projectId, 1]);
  const rows = await owner(`/requests?${window}&projectId=${other.projectId}`);
  t.same(
    (rows.data as Json[]).map((row) => row.projectId),
    [other.projectId],
  );
});

t.test('series: a bad granularity, or more buckets than served, answers 400 naming the param', async (t) => {
  const s = await scenario();
  await expect400(t, s.token, '/usage/series?granularity=week', 'granularity');
  await expect400(t, s.token, '/usage/series?from=2026-01-01&to=2026-06-01&granularity=hour', 'granularity');
  await expect400(t, s.token, '/usage/series?from=2000-01-01&to=2026-06-01', 'from');
  await expect400(t, s.token, '/usage/series?keyId=nope', 'keyId');
  t.equal((await ok(s.token, '/usage/series?from=2026-01-01&to=2026-06-01')).granularity, 'day');
});

// ---------------------------------------------------------------------------------------------
// GET /usage/comparison

t.test('comparison: this window against the previous one of the same length, with deltas', async (t) => {
  const s = await scenario();
  // previous: 2026-02-28 .. 2026-03-10
  await insert(s, { at: '2026-03-01T00:00:00Z', costMicros: 500_000, input: 100, latencyMs: 100 });
  await insert(s, { at: '2026-03-09T23:59:59Z', costMicros: 500_000, input: 100, latencyMs: 100 });
  await insert(s, { at: '2026-02-27T23:00:00Z', costMicros: 9_000_000 }); // before both
  // current: 2026-03-10 .. 2026-03-20
  await insert(s, { at: '2026-03-10T00:00:00Z', costMicros: 500_000, input: 100, latencyMs: 200 });
  await insert(s, { at: '2026-03-12T00:00:00Z', costMicros: 500_000, input: 100, latencyMs: 200 });
  await insert(s, { at: '2026-03-19T00:00:00Z', costMicros: 500_000, input: 0, latencyMs: 200, status: 500 });
  const body = await ok(s.token, '/usage/comparison?from=2026-03-10&to=2026-03-20');
  t.equal(body.object, 'usage_comparison');
  t.same([body.current.from, body.current.to], ['2026-03-10T00:00:00.000Z', '2026-03-20T00:00:00.000Z']);
  t.same([body.previous.from, body.previous.to], ['2026-02-28T00:00:00.000Z', '2026-03-10T00:00:00.000Z']);
  t.equal(body.current.totals.requests, 3);
  t.equal(body.previous.totals.requests, 2);
  t.same(body.deltas.requests, { absolute: 1, percent: 50 });
  t.same(body.deltas.costUsd, { absolute: 0.5, percent: 50 });
  t.same(body.deltas.tokens.input, { absolute: 0, percent: 0 });
  t.same(body.deltas.avgLatencyMs, { absolute: 100, percent: 100 });
  t.same(body.deltas.errors, { absolute: 1, percent: null }, 'percent is null when the previous figure is 0');
});

t.test('comparison: with nothing before, percentages are null; keyId narrows both windows', async (t) => {
  const s = await scenario();
  const other = randomUUID();
  await insert(s, { at: '2026-03-25T00:00:00Z', costMicros: 1_000_000 });
  await insert(s, { at: '2026-03-25T01:00:00Z', costMicros: 3_000_000, keyId: other });
  await insert(s, { at: '2026-03-22T01:00:00Z', costMicros: 1_000_000, keyId: other });
  const all = await ok(s.token, '/usage/comparison?from=2026-03-25&to=2026-03-26');
  t.same(all.deltas.requests, { absolute: 2, percent: null });
  t.same(all.deltas.costUsd, { absolute: 4, percent: null });
  t.same(all.deltas.p50LatencyMs, { absolute: null, percent: null }, 'no latency before: null');
  const one = await ok(s.token, `/usage/comparison?from=2026-03-22&to=2026-03-26&keyId=${other}`);
  t.equal(one.keyId, other);
  t.same([one.current.totals.requests, one.previous.totals.requests], [2, 0]);
  const shifted = await ok(s.token, `/usage/comparison?from=2026-03-25&to=2026-03-29&keyId=${other}`);
  t.same(shifted.deltas.costUsd, { absolute: 2, percent: 200 });
  await expect400(t, s.token, '/usage/comparison?from=2026-03-26&to=2026-03-25', 'from');
});

t.test('comparison: a window reaching back to 1970 compares with a previous window cut at the start of the range', async (t) => {
  const s = await scenario();
  const body = await ok(s.token, '/usage/comparison?from=1970-01-02&to=9999-12-31');
  t.same([body.previous.from, body.previous.to], ['1970-01-01T00:00:00.000Z', '1970-01-02T00:00:00.000Z']);
  t.equal(body.previous.totals.requests, 0);
});

// ---------------------------------------------------------------------------------------------
// GET /requests

t.test('requests: rows newest first in the documented shape', async (t) => {
  const s = await scenario();
  const older = await insert(s, { at: '2026-04-01T00:00:00Z' });
  const id = await insert(s, {
    at: '2026-04-01T10:00:00.123Z',
    endpoint: '/v1/responses',
    model: 'duo',
    provider: 'secondary',
    upstreamModel: 'up-secondary',
    status: 200,
    input: 11,
    cached: 2,
    cacheWrite: 3,
    output: 4,
    reasoning: 5,
    estimated: true,
    costMicros: 1_234_567,
    latencyMs: 2500,
    ttftMs: 300,
    streamed: true,
    attempts: 2,
    priceVersion: 'pv_abc',
  });
  const body = await ok(s.token, '/requests');
  t.equal(body.object, 'list');
  t.same(ids(body), [id, older]);
  t.equal(body.nextCursor, null);
  t.same(body.data[0], {
    object: 'request_log',
    id,
    createdAt: '2026-04-01T10:00:00.123Z',
    keyId: s.keyId,
    projectId: s.projectId,
    endpoint: '/v1/responses',
    model: 'duo',
    provider: 'secondary',
    upstreamModel: 'up-secondary',
    status: 200,
    errorCode: null,
    tokens: { input: 11, cachedInput: 2, cacheWrite: 3, output: 4, reasoning: 5, estimated: true },
    units: NO_ROW_UNITS,
    costUsd: 1.234567,
    latencyMs: 2500,
    ttftMs: 300,
    streamed: true,
    attempts: 2,
    priceVersion: 'pv_abc',
  });
});

t.test('requests: from and to bound the rows (to exclusive)', async (t) => {
  const s = await scenario();
  const a = await insert(s, { at: '2026-04-02T00:00:00Z' });
  const b = await insert(s, { at: '2026-04-02T12:00:00Z' });
  await insert(s, { at: '2026-04-03T00:00:00Z' });
  const c = await insert(s, { at: '2026-04-01T23:00:00Z' });
  t.same(ids(await ok(s.token, '/requests?from=2026-04-02&to=2026-04-03')), [b, a]);
  t.same(ids(await ok(s.token, '/requests?to=2026-04-02')), [c]);
  t.equal(ids(await ok(s.token, '/requests?from=2026-04-02')).length, 3);
  await expect400(t, s.token, '/requests?from=2026-04-03&to=2026-04-02', 'from');
  await expect400(t, s.token, '/requests?to=soon', 'to');
});

t.test('requests: keyId narrows to one key', async (t) => {
  const s = await scenario();
  const other = randomUUID();
  await insert(s, { at: '2026-04-04T00:00:00Z' });
  const mine = await insert(s, { at: '2026-04-04T01:00:00Z', keyId: other });
  t.same(ids(await ok(s.token, `/requests?keyId=${other}`)), [mine]);
  await expect400(t, s.token, '/requests?keyId=123', 'keyId');
});

t.test('requests: model filters on the exact model name', async (t) => {
  const s = await scenario();
  const exact = await insert(s, { at: '2026-04-05T00:00:00Z', model: 'gpt-4o' });
  await insert(s, { at: '2026-04-05T01:00:00Z', model: 'gpt-4o-mini' });
  await insert(s, { at: '2026-04-05T02:00:00Z', model: 'GPT-4O' });
  t.same(ids(await ok(s.token, '/requests?model=gpt-4o')), [exact]);
  t.same(ids(await ok(s.token, '/requests?model=gpt')), [], 'no partial match');
  await expect400(t, s.token, '/requests?model=', 'model');
});

t.test('requests: q matches a request id, or text in the model or endpoint, case-insensitively', async (t) => {
  const s = await scenario();
  const byId = await insert(s, { at: '2026-04-06T00:00:00Z', id: 'req_lookup_me', model: 'aaa', endpoint: '/v1/chat/completions' });
  const byModel = await insert(s, { at: '2026-04-06T01:00:00Z', model: 'Claude-Sonnet', endpoint: '/v1/chat/completions' });
  const byEndpoint = await insert(s, { at: '2026-04-06T02:00:00Z', model: 'bbb', endpoint: '/v1/Embeddings' });
  const percent = await insert(s, { at: '2026-04-06T03:00:00Z', model: 'odd_100%', endpoint: '/v1/chat/completions' });
  t.same(ids(await ok(s.token, '/requests?q=req_lookup_me')), [byId]);
  t.same(ids(await ok(s.token, '/requests?q=sonnet')), [byModel]);
  t.same(ids(await ok(s.token, '/requests?q=EMBEDDINGS')), [byEndpoint]);
  t.same(ids(await ok(s.token, `/requests?q=${encodeURIComponent('_100%')}`)), [percent], 'wildcard characters match literally');
  t.same(ids(await ok(s.token, '/requests?q=req_lookup')), [], 'a request id matches whole, not as a prefix');
  t.equal(ids(await ok(s.token, '/requests?q=completions')).length, 3);
  await expect400(t, s.token, `/requests?q=${'x'.repeat(201)}`, 'q');
});

t.test('requests: band=errors keeps status 400 and above', async (t) => {
  const s = await scenario();
  await insert(s, { at: '2026-04-07T00:00:00Z', status: 200 });
  await insert(s, { at: '2026-04-07T01:00:00Z', status: 399 });
  const e400 = await insert(s, { at: '2026-04-07T02:00:00Z', status: 400, errorCode: 'invalid_request' });
  const e502 = await insert(s, { at: '2026-04-07T03:00:00Z', status: 502, errorCode: 'upstream_error' });
  t.same(ids(await ok(s.token, '/requests?band=errors')), [e502, e400]);
  await expect400(t, s.token, '/requests?band=fast', 'band');
});

t.test('requests: band=slow is a streamed first token over 5000 ms or an unstreamed call over 30000 ms; exactly is not slow', async (t) => {
  const s = await scenario();
  await insert(s, { at: '2026-04-08T00:00:00Z', streamed: true, ttftMs: 5000, latencyMs: 60_000 });
  const streamedSlow = await insert(s, { at: '2026-04-08T01:00:00Z', streamed: true, ttftMs: 5001, latencyMs: 6000 });
  await insert(s, { at: '2026-04-08T02:00:00Z', streamed: false, latencyMs: 30_000 });
  const unstreamedSlow = await insert(s, { at: '2026-04-08T03:00:00Z', streamed: false, latencyMs: 30_001 });
  await insert(s, { at: '2026-04-08T04:00:00Z', streamed: true, ttftMs: null, latencyMs: 90_000 });
  await insert(s, { at: '2026-04-08T05:00:00Z', streamed: false, ttftMs: 9000, latencyMs: 100 });
  t.same(ids(await ok(s.token, '/requests?band=slow')), [unstreamedSlow, streamedSlow]);
});

t.test('requests: filters combine', async (t) => {
  const s = await scenario();
  const match = await insert(s, { at: '2026-04-09T01:00:00Z', model: 'm1', status: 500 });
  await insert(s, { at: '2026-04-09T02:00:00Z', model: 'm1', status: 200 });
  await insert(s, { at: '2026-04-09T03:00:00Z', model: 'm2', status: 500 });
  await insert(s, { at: '2026-04-10T03:00:00Z', model: 'm1', status: 500 });
  t.same(ids(await ok(s.token, `/requests?model=m1&band=errors&from=2026-04-09&to=2026-04-10&keyId=${s.keyId}`)), [match]);
});

t.test('requests: cursor pages visit every row exactly once, ties on created_at included', async (t) => {
  const s = await scenario();
  const times = [
    '2026-04-11T00:00:00Z',
    '2026-04-11T00:00:00Z',
    '2026-04-11T00:00:00Z',
    '2026-04-11T00:00:00Z',
    '2026-04-11T00:00:00.000001Z',
    '2026-04-11T00:00:00.000002Z',
    '2026-04-11T00:00:00.000999Z',
    '2026-04-11T00:00:01Z',
    '2026-04-11T00:00:01Z',
  ];
  for (let i = 0; i < 23; i += 1) await insert(s, { at: times[i % times.length]!, status: i % 3 === 0 ? 500 : 200 });
  const everything = ids(await ok(s.token, '/requests?limit=200'));
  t.equal(everything.length, 23);
  for (const [filter, expected] of [
    ['', everything],
    ['&band=errors', ids(await ok(s.token, '/requests?limit=200&band=errors'))],
  ] as const) {
    const seen: string[] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const page: Json = await ok(s.token, `/requests?limit=4${filter}${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
      t.ok(page.data.length <= 4);
      seen.push(...ids(page));
      cursor = page.nextCursor as string | null;
      pages += 1;
    } while (cursor && pages < 20);
    t.same(seen, expected, `paging${filter || ' (no filter)'} yields the one-page order: no duplicates, no gaps`);
    t.equal(new Set(seen).size, seen.length);
    t.equal(pages, Math.ceil(expected.length / 4));
  }
  const exact = await ok(s.token, '/requests?limit=23');
  t.equal(exact.nextCursor, null, 'no next page when the page holds the last row');
});

t.test('requests: a malformed cursor answers 400 naming cursor', async (t) => {
  const s = await scenario();
  const forged = Buffer.from(JSON.stringify({ at: 'yesterday', id: 'x' })).toString('base64url');
  for (const bad of ['not-base64-json', forged, Buffer.from('[1,2]').toString('base64url'), 'x'.repeat(513)]) {
    await expect400(t, s.token, `/requests?cursor=${encodeURIComponent(bad)}`, 'cursor');
  }
});

t.test('requests: a cursor naming an impossible or out-of-range instant answers 400 naming cursor', async (t) => {
  const s = await scenario();
  for (const at of ['2026-02-30T00:00:00.000000Z', '0000-01-01T00:00:00.000000Z', '1969-12-31T23:59:59.999999Z']) {
    const forged = Buffer.from(JSON.stringify({ at, id: 'req_x' })).toString('base64url');
    await expect400(t, s.token, `/requests?cursor=${forged}`, 'cursor');
  }
});

t.test('requests: limit defaults to 50, max 200; 201 answers 400 naming limit', async (t) => {
  const s = await scenario();
  for (let i = 0; i < 205; i += 1) await insert(s, { at: new Date(Date.UTC(2026, 3, 12, 0, 0, i)).toISOString() });
  const first = await ok(s.token, '/requests');
  t.equal(first.data.length, 50);
  t.type(first.nextCursor, 'string');
  t.equal((await ok(s.token, '/requests?limit=200')).data.length, 200);
  for (const bad of ['201', '0', 'many']) await expect400(t, s.token, `/requests?limit=${bad}`, 'limit');
});

// ---------------------------------------------------------------------------------------------
// Visibility

t.test('visibility: a key of project A never sees project B rows', async (t) => {
  const a = await scenario(['usage:read', 'requests:read', 'projects:write']);
  const b = await scenario();
  const mine = await insert(a, { at: '2026-04-13T01:00:00Z', costMicros: 1 });
  const theirs = await insert(b, { at: '2026-04-13T02:00:00Z', costMicros: 1000 });
  const window = '?from=2026-04-13&to=2026-04-14';
  t.same(ids(await ok(a.token, '/requests')), [mine]);
  t.same(ids(await ok(b.token, '/requests')), [theirs]);
  const usage = await ok(a.token, `/usage${window}`);
  t.same([usage.totals.requests, usage.totals.costUsd], [1, 0.000001]);
  t.same(
    usage.recent.map((r: Json) => r.id),
    [mine],
  );
  const series = await ok(a.token, `/usage/series${window}`);
  t.equal(
    series.buckets.reduce((sum: number, x: Json) => sum + x.requests, 0),
    1,
  );
  t.equal((await ok(a.token, `/usage/comparison${window}`)).current.totals.requests, 1);
  t.same(ids(await ok(a.token, '/requests/recent')), [mine]);
  const detail = await get(a.token, `/requests/${theirs}`);
  t.equal(detail.status, 404, "another project's request is not found");
  t.equal(detail.body.error.code, 'request_not_found');
  t.same(ids(await ok(a.token, `/requests?q=${theirs}`)), []);
});

t.test('visibility: a keyId filter naming a key outside what the caller sees returns nothing, not an error', async (t) => {
  const a = await scenario();
  const b = await scenario();
  await insert(b, { at: '2026-04-14T00:00:00Z' });
  const list = await get(a.token, `/requests?keyId=${b.keyId}`);
  t.equal(list.status, 200);
  t.same(list.body.data, []);
  const usage = await ok(a.token, `/usage?from=2026-04-14&to=2026-04-15&keyId=${b.keyId}`);
  t.equal(usage.totals.requests, 0);
  t.equal((await ok(test.ownerToken, `/usage?from=2026-04-14&to=2026-04-15&keyId=${b.keyId}`)).totals.requests, 1, 'the owner sees it');
});

t.test('visibility: a member sees the projects they have a role on; owners and admins see every project', async (t) => {
  const p1 = await scenario();
  const p2 = await scenario();
  const r1 = await insert(p1, { at: '2026-04-15T00:00:00Z' });
  const r2 = await insert(p2, { at: '2026-04-15T01:00:00Z' });
  const viewer = await addMember(p1.projectId, 'viewer');
  const outsider = (await addPerson(test, { role: 'member' })).token;
  const admin = (await addPerson(test, { role: 'admin' })).token;
  const window = '/requests?from=2026-04-15&to=2026-04-16';
  t.same(ids(await ok(viewer, window)), [r1], 'a viewer reads their project');
  t.same(ids(await ok(outsider, window)), [], 'a member without a project role sees nothing');
  t.equal((await ok(outsider, '/usage?from=2026-04-15&to=2026-04-16')).totals.requests, 0);
  t.equal((await get(outsider, `/requests/${r1}`)).status, 404);
  for (const token of [test.ownerToken, admin]) {
    const seen = ids(await ok(token, window));
    t.ok(seen.includes(r1) && seen.includes(r2), 'owner/admin see both projects');
  }
});

// ---------------------------------------------------------------------------------------------
// GET /requests/:id

t.test('request detail: one row in full; 404 for an unknown id; 400 for a malformed id', async (t) => {
  const s = await scenario();
  const id = await insert(s, { at: '2026-04-16T00:00:00Z', model: 'solo', costMicros: 42 });
  const detail = await ok(s.token, `/requests/${id}`);
  t.equal(detail.id, id);
  t.equal(detail.model, 'solo');
  t.equal(detail.costUsd, 0.000042);
  t.equal(detail.object, 'request_log');
  const missing = await get(s.token, '/requests/req_does_not_exist');
  t.equal(missing.status, 404);
  t.equal(missing.body.error.param, 'id');
  await expect400(t, s.token, `/requests/${encodeURIComponent('bad id!')}`, 'id');
  await expect400(t, s.token, `/requests/${'x'.repeat(129)}`, 'id');
});

t.test('bodies: a key holding requests:read sees the prompt and response when they were logged', async (t) => {
  const s = await scenario(['usage:read', 'requests:read']);
  const id = await insert(s, { at: '2026-04-17T00:00:00Z' });
  await storeBodies(id, { messages: [{ role: 'user', content: 'hi' }] }, { choices: [{ message: { content: 'hello' } }] });
  const detail = await ok(s.token, `/requests/${id}`);
  t.same(detail.request, { messages: [{ role: 'user', content: 'hi' }] });
  t.same(detail.response, { choices: [{ message: { content: 'hello' } }] });
  t.equal(detail.bodiesHidden, null);
});

t.test('bodies: a key without requests:read gets null bodies with bodiesHidden role', async (t) => {
  const s = await scenario(['usage:read']);
  const id = await insert(s, { at: '2026-04-17T01:00:00Z' });
  await storeBodies(id, { prompt: 'secret' }, { answer: 'secret' });
  const detail = await get(s.token, `/requests/${id}`);
  t.equal(detail.status, 200);
  t.same([detail.body.request, detail.body.response, detail.body.bodiesHidden], [null, null, 'role']);
  t.notMatch(JSON.stringify(detail.body), 'secret');
});

t.test('bodies: nothing logged gives null bodies with bodiesHidden not_logged', async (t) => {
  const s = await scenario(['usage:read', 'requests:read']);
  const id = await insert(s, { at: '2026-04-17T02:00:00Z' });
  const detail = await ok(s.token, `/requests/${id}`);
  t.same([detail.request, detail.response, detail.bodiesHidden], [null, null, 'not_logged']);
  t.equal((await ok(test.ownerToken, `/requests/${id}`)).bodiesHidden, 'not_logged', 'the owner too');
});

t.test('bodies: sessions see them as owner, admin, or project admin or developer; a project viewer does not', async (t) => {
  const s = await scenario();
  const id = await insert(s, { at: '2026-04-17T03:00:00Z' });
  await storeBodies(id, { prompt: 'p' }, { answer: 'a' });
  const cases: Array<[string, string, 'role' | null]> = [
    ['owner', test.ownerToken, null],
    ['org admin', (await addPerson(test, { role: 'admin' })).token, null],
    ['project admin', await addMember(s.projectId, 'admin'), null],
    ['project developer', await addMember(s.projectId, 'developer'), null],
    ['project viewer', await addMember(s.projectId, 'viewer'), 'role'],
  ];
  for (const [who, token, hidden] of cases) {
    const detail = await ok(token, `/requests/${id}`);
    t.equal(detail.bodiesHidden, hidden, `${who}: bodiesHidden ${String(hidden)}`);
    t.same(detail.request, hidden ? null : { prompt: 'p' }, `${who}: request body`);
  }
});

// ---------------------------------------------------------------------------------------------
// GET /requests/recent and /requests/window

t.test('recent: the latest 20 rows, newest first', async (t) => {
  const s = await scenario();
  const inserted: string[] = [];
  for (let i = 0; i < 25; i += 1) inserted.push(await insert(s, { at: new Date(Date.UTC(2026, 3, 18, 0, i)).toISOString() }));
  const body = await ok(s.token, '/requests/recent');
  t.equal(body.object, 'list');
  t.same(ids(body), inserted.slice(5).reverse());
  t.equal(body.nextCursor, null);
});

t.test('window: requests, errors, cost and latency over the last N minutes, per minute, empty minutes included', async (t) => {
  now = new Date('2026-06-20T12:30:20Z');
  const s = await scenario();
  await insert(s, { at: '2026-06-20T12:30:05Z', latencyMs: 100, costMicros: 1_000, streamed: true, ttftMs: 50 });
  await insert(s, { at: '2026-06-20T12:30:10Z', latencyMs: 300, costMicros: 2_000, status: 500, streamed: true, ttftMs: 150 });
  await insert(s, { at: '2026-06-20T12:25:00Z', latencyMs: 200, costMicros: 3_000 });
  await insert(s, { at: '2026-06-20T11:31:00Z', latencyMs: 400, costMicros: 4_000 });
  await insert(s, { at: '2026-06-20T11:30:59Z', latencyMs: 9_999, costMicros: 5_000 }); // outside the 60 minutes
  const body = await ok(s.token, '/requests/window');
  t.equal(body.object, 'request_window');
  t.equal(body.minutes, 60, 'default 60 minutes');
  t.same([body.from, body.to], ['2026-06-20T11:31:00.000Z', '2026-06-20T12:31:00.000Z']);
  t.same([body.requests, body.errors, body.costUsd, body.p50LatencyMs, body.p95LatencyMs, body.p50TtftMs], [4, 1, 0.01, 200, 400, 50]);
  t.equal(body.buckets.length, 60);
  t.same(body.buckets[0], {
    start: '2026-06-20T12:30:00.000Z',
    requests: 2,
    errors: 1,
    costUsd: 0.003,
    p50LatencyMs: 100,
    p95LatencyMs: 300,
    p50TtftMs: 50,
  });
  t.equal(body.buckets[59].start, '2026-06-20T11:31:00.000Z');
  t.equal(body.buckets[59].requests, 1);
  t.same(body.buckets[1], {
    start: '2026-06-20T12:29:00.000Z',
    requests: 0,
    errors: 0,
    costUsd: 0,
    p50LatencyMs: null,
    p95LatencyMs: null,
    p50TtftMs: null,
  });
  const five = await ok(s.token, '/requests/window?minutes=5');
  t.equal(five.buckets.length, 5);
  t.equal(five.requests, 2, 'minute 12:25 is outside the last five (12:26..12:30)');
  const day = await ok(s.token, '/requests/window?minutes=1440');
  t.equal(day.buckets.length, 1440);
  t.equal(day.requests, 5);
  now = new Date('2026-06-15T12:30:20Z');
});

t.test('window: minutes must be 1 to 1440', async (t) => {
  const s = await scenario();
  for (const bad of ['1441', '0', 'an-hour']) await expect400(t, s.token, `/requests/window?minutes=${bad}`, 'minutes');
});

// ---------------------------------------------------------------------------------------------
// Scopes and mounts

t.test('scopes: every usage operation needs usage:read (403 without it)', async (t) => {
  const s = await scenario(['inference', 'requests:read', 'keys:read']);
  const id = await insert(s, { at: '2026-04-19T00:00:00Z' });
  for (const path of ['/usage', '/usage/series', '/usage/comparison', '/requests', `/requests/${id}`, '/requests/recent', '/requests/window']) {
    const response = await get(s.token, path);
    t.equal(response.status, 403, path);
    t.equal(response.body.error.code, 'missing_scope', path);
  }
});

t.test('mounts: the operations answer on /platform/v1 as on /client', async (t) => {
  const s = await scenario();
  const id = await insert(s, { at: '2026-04-20T00:00:00Z' });
  const response = await test.call('GET', '/platform/v1/requests', { token: s.token });
  t.equal(response.statusCode, 200);
  t.same(ids(response.json() as Json), [id]);
  t.equal((await test.call('GET', `/platform/v1/requests/${id}`, { token: s.token })).statusCode, 200);
});
