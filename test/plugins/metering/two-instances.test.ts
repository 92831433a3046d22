import t from 'tap';
import { generateToken, SESSION_PREFIX } from '../../../core/identity/api-tokens.ts';
import { startFakeOpenAIUpstream } from '../../fakes/fake-openai-upstream.ts';
import { realServersConfig } from '../../helpers/app.ts';
import { startMeteredGateway, user } from './metered-gateway.ts';

/** Two gateway replicas on one PostgreSQL schema and one Redis prefix: limits are shared, not per replica. */
const real = realServersConfig();

t.test(
  'two gateway instances sharing PostgreSQL + Redis admit exactly the rpm limit between them',
  { skip: real ? false : 'needs TEST_PG_URL and TEST_REDIS_URL (two replicas share the real servers)' },
  async (t) => {
    if (!real) return;
    t.teardown(() => real.dropSchema()); // registered first: runs after both gateways have closed
    const upstream = await startFakeOpenAIUpstream({ record: false });
    t.teardown(() => upstream.close());
    const ownerToken = generateToken(SESSION_PREFIX);
    const a = await startMeteredGateway(t, { storage: real.storage, ownerToken, upstream });
    const b = await startMeteredGateway(t, { storage: real.storage, ownerToken, upstream });

    const { id, key } = await a.newKey({ name: 'shared rpm' });
    await a.patchKey(id, { rateLimits: { requestsPerMinute: 20 } });
    // Steady state first: both replicas have established the store's epoch and planned a key's
    // counters (a new Redis admits at once: the database knows no epoch for it, see GateRecovery).
    const warmUp = await a.newKey({ name: 'warm-up' });
    for (const replica of [a, b]) t.equal((await replica.chat(warmUp.key, { model: 'solo', messages: user('warm up'), max_tokens: 10 })).status, 200);

    // 60 calls, alternating replicas, all at once. GCRA refills one request every 3 s, so within
    // this burst exactly the bucket (20) can be admitted.
    const burstStarted = Date.now();
    const results = await Promise.all(Array.from({ length: 60 }, (_, i) => (i % 2 === 0 ? a : b).chat(key, { model: 'solo', messages: user(`call ${i}`), max_tokens: 10 })));
    const ok = results.filter((r) => r.status === 200);
    const limited = results.filter((r) => r.status === 429);
    const elapsed = Date.now() - burstStarted;
    // GCRA refills one request per 3 s; on a badly overloaded machine the burst could outlast that.
    const refills = Math.floor(elapsed / 3_000);
    if (refills === 0) {
      t.equal(ok.length, 20, `exactly 20 calls were admitted across the two replicas (burst took ${elapsed} ms)`);
      t.equal(limited.length, 40, 'the other 40 were refused with 429');
    } else {
      t.ok(ok.length >= 20 && ok.length <= 20 + refills, `20 admitted plus at most ${refills} refilled (burst took ${elapsed} ms): ${ok.length}`);
      t.equal(ok.length + limited.length, 60, 'the rest were refused with 429');
    }
    const served = { a: 0, b: 0 };
    results.forEach((r, i) => {
      if (r.status === 200) served[i % 2 === 0 ? 'a' : 'b'] += 1;
    });
    t.ok(served.a > 0 && served.b > 0, `both replicas admitted calls (a ${served.a}, b ${served.b})`);
    for (const r of limited) {
      if (r.body?.error?.code !== 'rate_limit_exceeded' || r.body?.error?.type !== 'rate_limit_error' || !/^\d+$/.test(r.headers.get('retry-after') ?? '')) {
        t.fail(`a refusal is not a rate_limit_exceeded / rate_limit_error with retry-after: ${r.headers.get('retry-after')} ${r.text}`);
        break;
      }
    }
    t.ok(
      limited.every((r) => Number(r.headers.get('retry-after')) >= 1),
      'retry-after is at least one second',
    );
    t.ok(
      limited.every((r) => r.headers.get('x-ratelimit-remaining-requests') === '0'),
      'a refusal reports no requests remaining',
    );

    // Both replicas wrote to the one ledger.
    await a.flush();
    await b.flush();
    const { rows } = await a.db.query<{ n: bigint }>('SELECT count(*)::bigint AS n FROM request_logs WHERE key_id = $1 AND status_code = 200', [id]);
    t.equal(Number(rows[0]!.n), 20, 'the shared log holds the 20 served calls');
  },
);
