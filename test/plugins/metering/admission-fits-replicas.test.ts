import t from 'tap';
import { realServersConfig } from '../../helpers/app.ts';
import { waitFor } from './metered-gateway.ts';
import { balanceOf, burst, chat, tally, callBody, capFitting, checkBilled, LONG_DEADLINE_MS, countOf, PROMPTS, startFixture } from './admission-fits.ts';

/**
 * Limits admit what fits on two replicas sharing one PostgreSQL schema and one Redis prefix
 * (issue 15, item 2): the same burst figures as admission-fits.test.ts, the calls spread over both.
 */
const real = realServersConfig();

t.test('two replicas sharing PostgreSQL and Redis', { skip: real ? false : 'needs TEST_PG_URL and TEST_REDIS_URL (two replicas share the real servers)' }, async (t) => {
  const fixture = await startFixture(t, 2, true);
  const { replicas } = fixture;

  t.test('a tokens/min limit of 290 admits exactly 10 of 40 concurrent calls of 29 tokens spread over both', async (t) => {
    const { id, key } = await replicas[0]!.newKey({ rateLimits: { tokensPerMinute: 290 } });
    const before = await balanceOf(fixture);
    const statuses = await burst(replicas, key, callBody('english'), 40);
    t.equal(countOf(statuses, 200), 10, `ten admitted (${tally(statuses)})`);
    t.equal(countOf(statuses, 429), 30, 'the other thirty refused with 429');
    await checkBilled(t, fixture, PROMPTS.english, 10, [id], before);
  });

  for (const calls of [10, 20]) {
    t.test(`a blocking key cap that fits ${calls} calls admits exactly ${calls} of 200 concurrent calls spread over both, none over`, async (t) => {
      const { id, key } = await replicas[0]!.newKey({ spendCap: capFitting(calls, PROMPTS.english) });
      const before = await balanceOf(fixture);
      const statuses = await burst(replicas, key, callBody('english'), 200);
      t.equal(countOf(statuses, 200), calls, `${calls} admitted (${tally(statuses)})`);
      t.equal(countOf(statuses, 402), 200 - calls, 'the rest refused with 402');
      await checkBilled(t, fixture, PROMPTS.english, calls, [id], before);
    });
  }

  t.test('a key cap raised from 10 to 20 calls while 10 are in flight admits exactly 10 more, calls spread over both', async (t) => {
    const { id, key } = await replicas[0]!.newKey({ spendCap: capFitting(10, PROMPTS.english) });
    const before = await balanceOf(fixture);
    let answered = 0;
    const call = (i: number) => chat(replicas[i % 2]!, key, callBody('held')).finally(() => (answered += 1));
    const first = Array.from({ length: 200 }, (_, i) => call(i));
    t.ok(await waitFor(() => fixture.held.requests.length === 10 && answered === 190, LONG_DEADLINE_MS), 'ten calls are held at the upstream, the rest refused');
    await replicas[0]!.patchKey(id, { spendCap: capFitting(20, PROMPTS.english) });
    // The other replica may still answer from its cached credential (the old, lower cap) for a
    // moment: rounds of calls over both until ten more are held, each round decided before the next.
    const second: Array<Promise<unknown>> = [];
    const tenMore = await waitFor(() => {
      if (answered + fixture.held.requests.length < 200 + second.length) return false;
      if (fixture.held.requests.length >= 20) return true;
      second.push(...Array.from({ length: 20 }, (_, i) => call(i)));
      return false;
    }, LONG_DEADLINE_MS);
    t.ok(tenMore, 'ten more are held under the raised cap');
    fixture.release();
    await Promise.all([...first, ...second]);
    t.equal(fixture.held.requests.length, 20, 'twenty admitted in all');
    await checkBilled(t, fixture, PROMPTS.english, 20, [id], before);
  });
});
