import t from 'tap';
import { estimateChatInputTokens } from '../../../providers/token-estimate.ts';
import { user } from './metered-gateway.ts';
import { balanceOf, burst, tally, callBody, capFitting, checkBilled, countOf, PROMPT_NAMES, PROMPTS, startFixture, tokensPerCall, FIT_BACKENDS } from './admission-fits.ts';

/**
 * Limits admit what fits (issue 15, items 1 and 2), on one replica: with a model whose tokenizer is
 * known and `max_tokens` equal to the real output, a tokens/min limit or a blocking spend cap (key,
 * project, account) that fits N calls admits exactly N of a concurrent burst, never more. Each
 * backend runs one gateway; every test uses keys of its own (admission-fits.ts has the calls).
 */

for (const backend of FIT_BACKENDS) {
  t.test(backend.name, { skip: backend.skip }, async (t) => {
    const fixture = await startFixture(t, 1, backend.onRealServers);
    const g = fixture.replicas[0]!;

    t.test('a tokens/min limit of 290 admits exactly 10 of 40 concurrent calls of 29 tokens (a 7-byte prompt, max_tokens 20)', async (t) => {
      t.equal(tokensPerCall(PROMPTS.english), 29, 'each call really uses 29 tokens (9 in, 20 out)');
      const { id, key } = await g.newKey({ rateLimits: { tokensPerMinute: 290 } });
      const before = await balanceOf(fixture);
      const statuses = await burst([g], key, callBody('english'), 40);
      t.equal(countOf(statuses, 200), 10, `ten admitted (${tally(statuses)})`);
      t.equal(countOf(statuses, 429), 30, 'the other thirty refused with 429');
      await checkBilled(t, fixture, PROMPTS.english, 10, [id], before);
    });

    t.test('a tokens/min limit that fits 10 calls admits exactly 10 of 40 for CJK and code prompts', async (t) => {
      for (const name of PROMPT_NAMES.filter((n) => n !== 'english')) {
        const { key } = await g.newKey({ rateLimits: { tokensPerMinute: 10 * tokensPerCall(PROMPTS[name]) } });
        const statuses = await burst([g], key, callBody(name), 40);
        t.equal(countOf(statuses, 200), 10, `${name}: ten of forty admitted (${tally(statuses)})`);
      }
    });

    t.test('the mock provider reserves exactly the input it reports: a tokens/min limit fitting 10 of its calls admits 10 of 40', async (t) => {
      // The mock's reply to this prompt is 18 tokens of its own counting: max_tokens asks for exactly that.
      const body = { model: 'mock-small', messages: user(PROMPTS.english), max_tokens: 18 };
      const perCall = estimateChatInputTokens({ messages: user(PROMPTS.english) as never }) + 18;
      const { id, key } = await g.newKey({ rateLimits: { tokensPerMinute: 10 * perCall } });
      const statuses = await burst([g], key, body, 40);
      t.equal(countOf(statuses, 200), 10, `ten of forty admitted (${tally(statuses)})`);
      await g.settled();
      const { rows } = await g.db.query<{ tokens: number }>('SELECT input_tokens + output_tokens AS tokens FROM request_logs WHERE key_id = $1 AND status_code = 200', [id]);
      t.same(
        rows.map((row) => Number(row.tokens)),
        Array(10).fill(perCall),
        `each served call used exactly the ${perCall} tokens it reserved`,
      );
    });

    for (const calls of [10, 20]) {
      t.test(`a blocking key cap that fits ${calls} calls admits exactly ${calls} of 200 concurrent calls, none over`, async (t) => {
        const { id, key } = await g.newKey({ spendCap: capFitting(calls, PROMPTS.english) });
        const before = await balanceOf(fixture);
        const statuses = await burst([g], key, callBody('english'), 200);
        t.equal(countOf(statuses, 200), calls, `${calls} admitted (${tally(statuses)})`);
        t.equal(countOf(statuses, 402), 200 - calls, 'the rest refused with 402');
        await checkBilled(t, fixture, PROMPTS.english, calls, [id], before);
      });
    }

    t.test('a blocking key cap that fits 10 calls admits exactly 10 of 100 for CJK and code prompts', async (t) => {
      for (const name of ['cjk', 'code'] as const) {
        const { id, key } = await g.newKey({ spendCap: capFitting(10, PROMPTS[name]) });
        const before = await balanceOf(fixture);
        const statuses = await burst([g], key, callBody(name), 100);
        t.equal(countOf(statuses, 200), 10, `${name}: ten of a hundred admitted (${tally(statuses)})`);
        await checkBilled(t, fixture, PROMPTS[name], 10, [id], before);
      }
    });
  });
}
