import t from 'tap';
import { createKey } from '../../../helpers/app.ts';
import { newestFirst, storedApp, trafficServer, writeRows } from './traffic-fixtures.ts';

const NOW = new Date('2026-03-10T12:30:00.000Z');
const minutesAgo = (minutes: number) => new Date(NOW.getTime() - minutes * 60_000);

t.test('pages newest first by keyset until the last row, none skipped or repeated', async (t) => {
  const test = await trafficServer(t, { at: NOW });
  const app = await storedApp(test, 'pager');
  // Seven rows, three of them in the same millisecond: ties are broken by the id.
  const written = await writeRows(test, app, [
    { at: minutesAgo(1) },
    { at: minutesAgo(2) },
    { at: minutesAgo(2) },
    { at: minutesAgo(2) },
    { at: minutesAgo(3) },
    { at: minutesAgo(4) },
    { at: minutesAgo(5) },
  ]);
  const seen: string[] = [];
  let cursor: string | null = null;
  const sizes: number[] = [];
  do {
    const query: string = `limit=3${cursor ? `&cursor=${cursor}` : ''}`;
    const response = await test.call('GET', `/client/apps/requests?${query}`);
    t.equal(response.statusCode, 200, response.body);
    const page = response.json();
    sizes.push(page.data.length);
    seen.push(...page.data.map((row: { id: string }) => row.id));
    if (cursor === null) t.ok(page.summary && page.facets && page.series, 'the first page adds summary, facets and series');
    else t.same([page.summary, page.facets, page.series], [null, null, null], 'later pages do not');
    cursor = page.nextCursor;
  } while (cursor !== null);
  t.same(sizes, [3, 3, 1]);
  t.same(
    seen,
    newestFirst(written).map((row) => row.id),
  );
});

t.test('a row shows what the proxy recorded', async (t) => {
  const test = await trafficServer(t, { at: NOW });
  const app = await storedApp(test, 'shown');
  const [row] = await writeRows(test, app, [{ at: minutesAgo(1), method: 'POST', path: '/items', status: 201, durationMs: 0.25, bytesIn: 17, bytesOut: 12 }]);
  const page = (await test.call('GET', '/client/apps/requests')).json();
  t.same(page.data, [
    {
      object: 'app_request',
      id: row!.id,
      at: minutesAgo(1).toISOString(),
      appId: app.appId,
      serviceId: app.serviceId,
      deploymentId: app.deploymentId,
      method: 'POST',
      path: '/items',
      status: 201,
      durationMs: 0.25,
      bytesIn: 17,
      bytesOut: 12,
    },
  ]);
});

t.test('filters combine: band, method, path, since and until, appId', async (t) => {
  const test = await trafficServer(t, { at: NOW });
  const one = await storedApp(test, 'one');
  const two = await storedApp(test, 'two');
  const rows = await writeRows(test, one, [
    { at: minutesAgo(1), status: 200, method: 'GET', path: '/a' },
    { at: minutesAgo(2), status: 404, method: 'GET', path: '/missing' },
    { at: minutesAgo(3), status: 502, method: 'POST', path: '/a' },
    { at: minutesAgo(90), status: 301, method: 'GET', path: '/old' },
  ]);
  const [other] = await writeRows(test, two, [{ at: minutesAgo(1), status: 200, method: 'GET', path: '/a' }]);
  const ids = async (query: string) => ((await test.call('GET', `/client/apps/requests?${query}`)).json().data as Array<{ id: string }>).map((row) => row.id);
  t.same(await ids('band=errors'), [rows[1]!.id, rows[2]!.id], 'errors: 400 and above');
  t.same(await ids('band=5xx'), [rows[2]!.id]);
  t.same(await ids('band=3xx'), [rows[3]!.id]);
  t.same(await ids('method=post'), [rows[2]!.id], 'the method in any case');
  t.same(
    await ids('path=/a&band=2xx'),
    newestFirst([rows[0]!, other!]).map((row) => row.id),
    'across apps',
  );
  t.same(await ids(`path=/a&appId=${one.appId}`), [rows[0]!.id, rows[2]!.id]);
  t.same(await ids(`since=${minutesAgo(2).toISOString()}&appId=${one.appId}`), [rows[0]!.id, rows[1]!.id], 'since is inclusive');
  t.same(await ids(`until=${minutesAgo(3).toISOString()}`), [rows[3]!.id], 'until is exclusive');
  t.same(await ids('path=/a/'), [], 'the path is exact');
});

t.test('a request id matches whole or by its first half, searches everything held and ignores the other filters', async (t) => {
  const test = await trafficServer(t, { at: NOW });
  const app = await storedApp(test, 'finder');
  const [target, neighbour] = await writeRows(test, app, [
    { at: minutesAgo(60 * 24 * 30), status: 500, method: 'DELETE' },
    { at: minutesAgo(1), status: 200 },
  ]);
  const id = target!.id;
  const find = async (requestId: string, extra = '') =>
    ((await test.call('GET', `/client/apps/requests?requestId=${requestId}${extra}`)).json().data as Array<{ id: string }>).map((row) => row.id);
  t.same(await find(id), [id], 'whole');
  const half = id.slice(0, Math.ceil(id.length / 2));
  t.same(await find(half), [id], 'its first half');
  t.same(await find(id.slice(0, half.length - 1)), [], 'less than half matches nothing');
  t.same(await find(id.slice(1)), [], 'only a prefix');
  t.same(await find(id, `&band=2xx&method=GET&since=${minutesAgo(5).toISOString()}&path=/nowhere`), [id], 'other filters are ignored');
  t.not(neighbour!.id, id);
});

t.test('facets count over the window without being narrowed by the other filters; summary and series are narrowed', async (t) => {
  const test = await trafficServer(t, { at: NOW });
  const one = await storedApp(test, 'faceted');
  const two = await storedApp(test, 'second');
  await writeRows(test, one, [
    { at: minutesAgo(10), method: 'GET', path: '/a', status: 200, durationMs: 10, bytesIn: 1, bytesOut: 100 },
    { at: minutesAgo(70), method: 'GET', path: '/b', status: 404, durationMs: 20, bytesIn: 2, bytesOut: 200 },
    { at: minutesAgo(75), method: 'POST', path: '/a', status: 500, durationMs: 30, bytesIn: 3, bytesOut: 300 },
  ]);
  await writeRows(test, two, [{ at: minutesAgo(5), method: 'GET', path: '/a', status: 200, durationMs: 40, bytesIn: 4, bytesOut: 400 }]);
  const page = (await test.call('GET', '/client/apps/requests?method=GET&band=errors')).json();
  t.equal(page.data.length, 1);
  t.same(page.facets.methods, [
    { value: 'GET', count: 3 },
    { value: 'POST', count: 1 },
  ]);
  t.same(page.facets.bands, [
    { value: '2xx', count: 2 },
    { value: '4xx', count: 1 },
    { value: '5xx', count: 1 },
  ]);
  t.same(page.facets.paths, [
    { value: '/a', count: 3 },
    { value: '/b', count: 1 },
  ]);
  t.same(page.facets.apps, [
    { id: one.appId, name: 'faceted', count: 3 },
    { id: two.appId, name: 'second', count: 1 },
  ]);
  t.same(page.summary, {
    requests: 1,
    errors: 1,
    errorRate: 1,
    serverErrors: 0,
    p50DurationMs: 20,
    p95DurationMs: 20,
    p99DurationMs: 20,
    bytesIn: 2,
    bytesOut: 200,
  });
  t.equal(page.series.granularity, 'hour');
  t.equal(page.series.to, NOW.toISOString());
  t.equal(page.series.buckets.length, 25, 'a day of hours, the partial ones at both ends included');
  const nonEmpty = page.series.buckets.filter((bucket: { requests: number }) => bucket.requests > 0);
  t.same(
    nonEmpty.map((bucket: { start: string; requests: number }) => [bucket.start, bucket.requests]),
    [['2026-03-10T11:00:00.000Z', 1]],
    'the filtered row, in its hour',
  );

  const windowed = (await test.call('GET', `/client/apps/requests?since=${minutesAgo(30).toISOString()}&appId=${one.appId}`)).json();
  t.same(
    windowed.facets.apps.map((app: { count: number }) => app.count),
    [1, 1],
    'the time window narrows the facets, appId does not',
  );
  const all = (await test.call('GET', '/client/apps/requests')).json();
  t.same(all.summary.requests, 4);
  t.equal(all.summary.errorRate, 0.5);
  t.equal(all.summary.p50DurationMs, 20);
});

t.test('the series is daily past two days', async (t) => {
  const test = await trafficServer(t, { at: NOW });
  const app = await storedApp(test, 'daily');
  await writeRows(test, app, [{ at: minutesAgo(60 * 24 * 3) }, { at: minutesAgo(1) }, { at: minutesAgo(2) }]);
  const page = (await test.call('GET', `/client/apps/requests?since=${minutesAgo(60 * 24 * 5).toISOString()}`)).json();
  t.equal(page.series.granularity, 'day');
  t.same(
    page.series.buckets.map((bucket: { start: string; requests: number }) => [bucket.start.slice(0, 10), bucket.requests]),
    [
      ['2026-03-10', 2],
      ['2026-03-09', 0],
      ['2026-03-08', 0],
      ['2026-03-07', 1],
      ['2026-03-06', 0],
      ['2026-03-05', 0],
    ],
  );
});

t.test('only apps of projects the caller sees; another project’s app is a 404', async (t) => {
  const test = await trafficServer(t, { at: NOW });
  const project = (await test.call('POST', '/client/projects', { body: { name: 'other' } })).json();
  const mine = await storedApp(test, 'mine');
  const theirs = await storedApp(test, 'theirs', { organizationId: test.organizationId, projectId: project.id });
  const [own] = await writeRows(test, mine, [{ at: minutesAgo(1) }]);
  await writeRows(test, theirs, [{ at: minutesAgo(2) }]);
  const { key } = await createKey(test, { scopes: ['apps:read'] });
  const page = (await test.call('GET', '/client/apps/requests', { token: key })).json();
  t.same(
    page.data.map((row: { id: string }) => row.id),
    [own!.id],
  );
  t.same(
    page.facets.apps.map((app: { id: string }) => app.id),
    [mine.appId],
  );
  const refused = await test.call('GET', `/client/apps/requests?appId=${theirs.appId}`, { token: key });
  t.equal(refused.statusCode, 404);
  t.equal(refused.json().error.code, 'app_not_found');
  t.equal(refused.json().error.param, 'appId');
  const owner = (await test.call('GET', '/client/apps/requests')).json();
  t.equal(owner.data.length, 2, 'the owner sees every project');
});

t.test('a service’s requests are its own; another project’s service is a 404', async (t) => {
  const test = await trafficServer(t, { at: NOW });
  const project = (await test.call('POST', '/client/projects', { body: { name: 'elsewhere' } })).json();
  const one = await storedApp(test, 'svc-one');
  const two = await storedApp(test, 'svc-two');
  const far = await storedApp(test, 'svc-far', { organizationId: test.organizationId, projectId: project.id });
  const [mine, second] = await writeRows(test, one, [{ at: minutesAgo(1), status: 500 }, { at: minutesAgo(2) }]);
  const [others] = await writeRows(test, two, [{ at: minutesAgo(1) }]);
  const page = (await test.call('GET', `/client/services/${one.serviceId}/requests`)).json();
  t.same(
    page.data.map((row: { id: string }) => row.id),
    [mine!.id, second!.id],
  );
  t.same(
    page.facets.apps.map((app: { id: string }) => app.id),
    [one.appId],
  );
  const byId = (await test.call('GET', `/client/services/${one.serviceId}/requests?requestId=${others!.id}`)).json();
  t.same(byId.data, [], 'the request id search stays within the service');
  const unknown = await test.call('GET', `/client/services/${one.serviceId}/requests?appId=${one.appId}`);
  t.equal(unknown.statusCode, 400, 'no appId on a service');
  t.equal(unknown.json().error.param, 'appId');
  const { key } = await createKey(test, { scopes: ['apps:read'] });
  const refused = await test.call('GET', `/client/services/${far.serviceId}/requests`, { token: key });
  t.equal(refused.statusCode, 404);
  t.equal(refused.json().error.code, 'service_not_found');
});

t.test('a forged cursor and unknown filters are 400s naming them', async (t) => {
  const test = await trafficServer(t, { at: NOW });
  const forged = await test.call('GET', '/client/apps/requests?cursor=bm90LWEtY3Vyc29y');
  t.equal(forged.statusCode, 400);
  t.equal(forged.json().error.param, 'cursor');
  const band = await test.call('GET', '/client/apps/requests?band=slow');
  t.equal(band.statusCode, 400);
  t.equal(band.json().error.param, 'band');
  const unknown = await test.call('GET', '/client/apps/requests?model=x');
  t.equal(unknown.statusCode, 400);
  t.match(unknown.json().error.message, /model/);
});
