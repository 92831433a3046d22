import t from 'tap';
import { waitFor } from './metered-gateway.ts';
import { balanceOf, chat, outcome, tally, capFitting, checkBilled, LONG_DEADLINE_MS, countOf, PROMPTS, startFixture, callBody, FIT_BACKENDS } from './admission-fits.ts';

/**
 * A blocking cap changed while calls are in flight admits what the new cap leaves, exactly (issue
 * 15, item 2), on one replica. As in admission-fits.test.ts (split from it to keep each file
 * quick), each backend runs one gateway.
 */

for (const backend of FIT_BACKENDS) {
  t.test(backend.name, { skip: backend.skip }, async (t) => {
    const fixture = await startFixture(t, 1, backend.onRealServers);
    const g = fixture.replicas[0]!;

    t.test('a key cap raised from 10 to 20 calls while 10 are in flight admits exactly 10 more of 200', async (t) => {
      const { id, key } = await g.newKey({ spendCap: capFitting(10, PROMPTS.english) });
      const before = await balanceOf(fixture);
      let answered = 0;
      const call = () => chat(g, key, callBody('held')).finally(() => (answered += 1));
      const first = Array.from({ length: 200 }, call);
      t.ok(await waitFor(() => fixture.held.requests.length === 10 && answered === 190, LONG_DEADLINE_MS), 'ten calls are held at the upstream, the rest refused');
      await g.patchKey(id, { spendCap: capFitting(20, PROMPTS.english) });
      const second = Array.from({ length: 200 }, call);
      t.ok(await waitFor(() => fixture.held.requests.length === 20 && answered === 380, LONG_DEADLINE_MS), 'ten more are held under the raised cap, the rest refused');
      fixture.release();
      const statuses = (await Promise.all([...first, ...second])).map(outcome);
      t.equal(countOf(statuses, 200), 20, `twenty of four hundred admitted in all (${tally(statuses)})`);
      t.equal(countOf(statuses, 402), 380);
      await checkBilled(t, fixture, PROMPTS.english, 20, [id], before);
    });
  });
}
