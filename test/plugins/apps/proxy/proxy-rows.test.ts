import { createHash, randomBytes, randomUUID } from 'node:crypto';
import http from 'node:http';
import t from 'tap';
import { runMigrations } from '../../../../adapters/sql/migrator.ts';
import { DatabaseUnavailable, type Queryable } from '../../../../core/ports/database.ts';
import { newRequestId } from '../../../../core/kernel/request-ids.ts';
import { type AppRequestRow, appsProxyMigrations, insertAppRequests } from '../../../../plugins/apps/proxy/index.ts';
import { databaseBackends } from '../../../helpers/databases.ts';
import { call, listSource, route, startProxy, startUpstream } from './proxy-fixtures.ts';

interface StoredRow {
  id: string;
  organization_id: string;
  app_id: string;
  service_id: string;
  deployment_id: string | null;
  method: string;
  path: string;
  status_code: number;
  duration_ms: number;
  bytes_in: string;
  bytes_out: string;
  created_at: Date;
}

for (const backend of databaseBackends()) {
  t.test(`each proxied request leaves one row, written in batches (${backend.name})`, async (t) => {
    const { db, cleanup } = await backend.create();
    t.teardown(cleanup);
    await runMigrations(db, appsProxyMigrations);
    const statements: number[] = [];
    const counting: Queryable = {
      query(sql, params) {
        if (sql.includes('INSERT INTO app_requests')) statements.push(((params ?? [])[0] as unknown[]).length);
        return db.query(sql, params);
      },
    };
    const app = await startUpstream(t, (req, res) => {
      req.resume();
      req.on('end', () => res.writeHead(req.method === 'POST' ? 201 : 200).end('twelve bytes'));
    });
    const hello = route('hello', app.target);
    const sleepy = route('sleepy', null);
    const before = new Date();
    // A long interval: only the explicit flush below writes, so the batch is all the rows.
    const { port, rows } = await startProxy(t, { source: listSource([hello, sleepy]), database: counting, config: { rows: { flushIntervalMs: 60_000, batchSize: 500, maxQueue: 1000 } } });
    const got = await call(port, 'hello.localhost', { path: '/items?token=secret' });
    const posted = await call(port, 'hello.localhost', { method: 'POST', path: '/items', body: 'a body of 17 byte' });
    await call(port, 'sleepy.localhost');
    await call(port, 'nobody.localhost');
    await rows.flush();

    t.same(statements, [3], 'one statement for the three rows; the unknown host left none');
    const { rows: stored } = await db.query<StoredRow>('SELECT * FROM app_requests ORDER BY created_at, id');
    t.equal(stored.length, 3);
    const byId = new Map(stored.map((row) => [row.id, row]));
    const getRow = byId.get(String(got.headers['x-request-id']));
    t.match(getRow, {
      organization_id: hello.organizationId,
      app_id: hello.appId,
      service_id: hello.serviceId,
      deployment_id: hello.deploymentId,
      method: 'GET',
      path: '/items',
      status_code: 200,
    });
    t.equal(Number(getRow?.bytes_in), 0);
    t.equal(Number(getRow?.bytes_out), 12);
    t.ok((getRow?.duration_ms ?? -1) >= 0 && (getRow?.duration_ms ?? 1e9) < 10_000, 'a duration in milliseconds');
    t.ok((getRow?.created_at.getTime() ?? 0) >= before.getTime() - 1000, 'stamped with the time it arrived');
    t.match(byId.get(String(posted.headers['x-request-id'])), { method: 'POST', status_code: 201, bytes_in: '17' });
    t.match(
      stored.find((row) => row.status_code === 503),
      { method: 'GET', path: '/', service_id: sleepy.serviceId, deployment_id: sleepy.deploymentId },
      'a stopped app leaves a 503 row',
    );
  });
}

for (const backend of databaseBackends()) {
  t.test(`a batch written again after a failed write is stored once; a new batch pays no conflict check (${backend.name})`, async (t) => {
    const { db, cleanup } = await backend.create();
    t.teardown(cleanup);
    await runMigrations(db, appsProxyMigrations);
    const organizationId = randomUUID();
    const appId = randomUUID();
    const batch: AppRequestRow[] = [1, 2, 3].map((n) => {
      const at = Date.UTC(2026, 10, 27, 12, 0, 0, n);
      return {
        id: newRequestId(at),
        at: new Date(at),
        organizationId,
        appId,
        serviceId: appId,
        deploymentId: null,
        method: 'GET',
        path: `/${n}`,
        status: 200,
        durationMs: 0.5,
        bytesIn: 0,
        bytesOut: 2,
      };
    });
    await insertAppRequests(db, batch);
    // The write whose answer was lost is tried again: told its rows may be there, it adds none twice.
    await insertAppRequests(db, [...batch, { ...(batch[0] as AppRequestRow), id: newRequestId(Date.UTC(2026, 10, 27, 12, 0, 1)) }], { mayBeStored: true });
    const { rows } = await db.query<{ n: number }>('SELECT count(*)::int AS n FROM app_requests');
    t.equal(rows[0]?.n, 4);
    await t.rejects(insertAppRequests(db, batch), 'the same rows as new: the unique index refuses them');
  });
}

t.test('a large chunked upload the app reads slowly arrives whole, and its row counts every byte once', async (t) => {
  const received = createHash('sha256');
  let receivedBytes = 0;
  const app = await startUpstream(t, (req, res) => {
    // Reads one chunk at a time with a pause between, so the proxy must hold the client back.
    req.on('data', (chunk: Buffer) => {
      received.update(chunk);
      receivedBytes += chunk.length;
      req.pause();
      setImmediate(() => req.resume());
    });
    req.on('end', () => res.end(`${receivedBytes}`));
  });
  // The insert's parameters are one array per column: id first, bytes_in eleventh.
  const written: Array<{ id: unknown; bytesIn: unknown }> = [];
  const capturing: Queryable = {
    async query(_sql, params) {
      const [ids, , , , , , , , , , bytesIn] = (params ?? []) as unknown[][];
      for (const [i, id] of (ids ?? []).entries()) written.push({ id, bytesIn: bytesIn?.[i] });
      return { rows: [], rowCount: 0 };
    },
  };
  const { port, rows } = await startProxy(t, { source: listSource([route('upload', app.target)]), database: capturing });
  const body = randomBytes(3 * 1024 * 1024 + 17);
  const answer = await new Promise<{ status: number; text: string; id: string }>((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, method: 'PUT', path: '/blob', headers: { host: 'upload.localhost' } }, (res) => {
      let text = '';
      res.on('data', (chunk: Buffer) => (text += chunk.toString()));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text, id: String(res.headers['x-request-id']) }));
    });
    req.on('error', reject);
    // No content-length: sent chunked, in 64 KiB writes.
    for (let at = 0; at < body.length; at += 65_536) req.write(body.subarray(at, at + 65_536));
    req.end();
  });
  await rows.flush();
  t.same({ status: answer.status, text: answer.text }, { status: 200, text: String(body.length) });
  t.equal(received.digest('hex'), createHash('sha256').update(body).digest('hex'), 'the same bytes, in order');
  t.same(written, [{ id: answer.id, bytesIn: body.length }]);
});

t.test('the proxy keeps serving while the database is unreachable; rows past the queue are dropped and counted', async (t) => {
  const down: Queryable = {
    async query() {
      throw new DatabaseUnavailable('connection refused');
    },
  };
  const app = await startUpstream(t, (_req, res) => res.end('up'));
  const source = listSource([route('hello', app.target)]);
  const { port, rows, routes } = await startProxy(t, { source, database: down, config: { rows: { flushIntervalMs: 60_000, batchSize: 500, maxQueue: 100 } } });
  source.failing = true;
  await t.rejects(routes.reload(), /database unreachable/, 'the routes cannot be read either');

  for (let i = 0; i < 120; i += 1) {
    const answer = await call(port, 'hello.localhost');
    if (answer.status !== 200 || answer.body !== 'up') t.fail(`request ${i} answered ${answer.status}`);
  }
  await rows.flush();
  t.match(rows.snapshot(), { queued: 100, dropped: 20, written: 0, failedFlushes: 1 });
});
