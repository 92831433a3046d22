import http from 'node:http';
import t from 'tap';
import type { Test } from 'tap';
import type { AppConfigInput } from '../../../config/schema.ts';
import { realServersConfig } from '../../helpers/app.ts';
import { startMeteredGateway, user, waitFor } from './metered-gateway.ts';

const CLIENTS = 500;

async function disconnectMidStream(t: Test, storage: AppConfigInput['storage'] | undefined) {
  const started = Date.now();
  // Every stream is slow: 2 words per chunk, 100 ms between chunks, about 3 s if read to the end.
  const g = await startMeteredGateway(t, {
    storage,
    upstreamOptions: {
      record: false,
      defaultReply: { content: Array.from({ length: 50 }, (_, i) => `word${i}`).join(' '), chunkDelayMs: 100, usage: { prompt_tokens: 20, completion_tokens: 50 } },
    },
  });
  const orgId = g.test.organizationId;
  const { id, key } = await g.newKey({ name: 'leaver' });
  // A concurrency limit, so every call holds a lease (without one there is nothing to leak).
  await g.patchKey(id, { rateLimits: { concurrency: 1_000, requestsPerMinute: 100_000 } });
  const leaseKey = `conc:key:${id}`;

  let firstChunks = 0;
  let peakLeases = 0;
  const statuses: number[] = [];
  // A plain socket per client, destroyed after the first chunk: the abrupt way a client goes away.
  const oneClient = (i: number) =>
    new Promise<void>((resolve, reject) => {
      const request = http.request(
        `${g.url}/v1/chat/completions`,
        { method: 'POST', agent: false, headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' } },
        (response) => {
          statuses.push(response.statusCode ?? 0);
          response.once('data', (chunk: Buffer) => {
            if (chunk.byteLength > 0) firstChunks += 1;
            const sample = i % 50 === 0 ? g.coordination.leases.active(leaseKey) : Promise.resolve(0);
            void sample.then((n) => {
              peakLeases = Math.max(peakLeases, n);
              request.destroy();
              resolve();
            }, reject);
          });
        },
      );
      request.on('error', (error) => (request.destroyed ? undefined : reject(error)));
      request.end(JSON.stringify({ model: 'solo', messages: user(`stream ${i}`), stream: true, max_tokens: 200 }));
    });
  await Promise.all(Array.from({ length: CLIENTS }, (_, i) => oneClient(i)));
  t.comment(`clients done after ${Date.now() - started} ms`);
  t.equal(statuses.filter((s) => s === 200).length, CLIENTS, 'every stream was admitted');
  t.equal(firstChunks, CLIENTS, 'every client read a first chunk before leaving');
  t.ok(peakLeases > 0, `leases were held while the streams ran (seen ${peakLeases})`);

  const released = await waitFor(async () => (await g.coordination.leases.active(leaseKey)) === 0, 10_000, 50);
  t.comment(`leases released after ${Date.now() - started} ms`);
  t.ok(released, 'every concurrency lease was released');
  t.equal(await g.coordination.leases.active(leaseKey), 0, 'the key holds no lease');

  // Every reservation settled: after the log is written the live counter is the ledger balance.
  const creditKey = `credit:${orgId}`;
  let counter: number | null = null;
  let balance: bigint | null = null;
  await waitFor(
    async () => {
      await g.flush();
      counter = (await g.coordination.allowances.peek([creditKey]))[0] ?? null;
      balance = await g.ledger.balance(orgId);
      return counter !== null && balance !== null && BigInt(counter) === balance;
    },
    5_000,
    50,
  );
  t.ok(balance !== null && balance < 1_000_000_000n, `the departed streams were charged (balance ${balance} µ$)`);
  t.equal(counter, Number(balance), 'the credit counter equals the ledger balance (no reservation stuck)');
  t.equal(g.writer.pendingMicros('account', orgId), 0n, 'nothing is left pending in the writer');

  const { rows } = await g.db.query<{ status_code: number; n: bigint; estimated: boolean }>(
    'SELECT status_code, usage_estimated AS estimated, count(*)::bigint AS n FROM request_logs WHERE key_id = $1 GROUP BY 1, 2',
    [id],
  );
  t.same(
    rows.map((r) => ({ status: r.status_code, estimated: r.estimated, n: Number(r.n) })),
    [{ status: 499, estimated: true, n: CLIENTS }],
    'each departed stream is logged once as 499 with usage estimated from what was sent',
  );
  t.comment(`took ${Date.now() - started} ms`);
}

t.test('500 clients that disconnect mid-stream leave no leaked concurrency lease or reservation', async (t) => {
  t.test('embedded: PGlite + in-memory coordination', (t) => disconnectMidStream(t, undefined));
  const real = realServersConfig();
  t.test('PostgreSQL + Redis', { skip: real ? false : 'TEST_PG_URL and TEST_REDIS_URL are not set' }, async (t) => {
    if (!real) return;
    t.teardown(() => real.dropSchema());
    await disconnectMidStream(t, real.storage);
  });
});
