import t from 'tap';
import { balanceOf, chat, outcome, tally, capFitting, checkBilled, countOf, PROMPTS, startFixture, callBody, FIT_BACKENDS } from './admission-fits.ts';

/**
 * Blocking project and account caps admit what fits (issue 15, item 2), on one replica: admission
 * must check them on every call. As in admission-fits.test.ts (split from it to keep each file
 * quick), each backend runs one gateway and every test uses keys of its own.
 */

for (const backend of FIT_BACKENDS) {
  t.test(backend.name, { skip: backend.skip }, async (t) => {
    const fixture = await startFixture(t, 1, backend.onRealServers);
    const g = fixture.replicas[0]!;

    t.test('a blocking project cap is enforced at admission: one that fits 10 calls admits exactly 10 of 100 across two keys', async (t) => {
      const created = await g.test.call('POST', '/client/projects', { body: { name: 'capped project' } });
      t.equal(created.statusCode, 201);
      const projectId = created.json().id as string;
      const patched = await g.test.call('PATCH', `/client/projects/${projectId}`, { body: { spendCap: capFitting(10, PROMPTS.english, 'month') } });
      t.equal(patched.statusCode, 200, 'the owner sets the project cap');
      const one = await g.newKey({ projectId });
      const two = await g.newKey({ projectId });
      const before = await balanceOf(fixture);
      const results = await Promise.all(Array.from({ length: 100 }, (_, i) => chat(g, i % 2 === 0 ? one.key : two.key, callBody('english'))));
      t.equal(countOf(results.map(outcome), 200), 10, `ten of a hundred admitted (${tally(results.map(outcome))})`);
      const refused = results.find((r) => r.status === 402);
      t.equal(refused?.body.error.code, 'budget_exceeded');
      t.match(refused?.body.error.message, /project spend cap/, 'refused by the project cap');
      await checkBilled(t, fixture, PROMPTS.english, 10, [one.id, two.id], before);
    });

    // Last: the account cap holds every key of the organisation.
    t.test('a blocking account cap is enforced at admission: one that fits 10 more calls admits exactly 10 of 100 across two keys', async (t) => {
      const one = await g.newKey();
      const two = await g.newKey();
      await g.settled();
      const spentToday = await g.db.query<{ cost: bigint }>('SELECT COALESCE(sum(cost_micros), 0)::bigint AS cost FROM request_logs');
      const cap = capFitting(10, PROMPTS.english, 'day');
      const accountCap = { ...cap, usd: cap.usd + Number(spentToday.rows[0]!.cost) / 1e6 };
      const patched = await g.test.call('PATCH', '/client/budget', { body: { accountCap } });
      t.equal(patched.statusCode, 200, 'the owner sets the account cap');
      const before = await balanceOf(fixture);
      const results = await Promise.all(Array.from({ length: 100 }, (_, i) => chat(g, i % 2 === 0 ? one.key : two.key, callBody('english'))));
      t.equal(countOf(results.map(outcome), 200), 10, `ten of a hundred admitted (${tally(results.map(outcome))})`);
      t.match(results.find((r) => r.status === 402)?.body.error.message, /account spend cap/, 'refused by the account cap');
      await checkBilled(t, fixture, PROMPTS.english, 10, [one.id, two.id], before);
    });
  });
}
