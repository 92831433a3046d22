import t, { type Test } from 'tap';
import { countTokens as gpt4oChatTokens } from 'gpt-tokenizer/model/gpt-4o';
import type { AppConfigInput } from '../../../config/schema.ts';
import { loadEncoding } from '../../../providers/input-token-bound.ts';
import { TEST_PRICES } from '../../helpers/gateway.ts';
import { onEveryBackend, startMeteredGateway, user, type MeteredGateway } from './metered-gateway.ts';

/**
 * A blocking spend cap holds whatever the script of the prompt: the upstream counts a Chinese
 * prompt with o200k (a third of a token per byte, more than the four bytes a token the gateway
 * once assumed), and many concurrent calls against a key capped at a total must not spend past it.
 * Run on the embedded stack, and on PostgreSQL + Redis when TEST_PG_URL and TEST_REDIS_URL are set.
 */

const CLASSICAL_CHINESE = '道可道，非常道。名可名，非常名。無名天地之始；有名萬物之母。故常無欲，以觀其妙；常有欲，以觀其徼。此兩者，同出而異名，同謂之玄。玄之又玄，衆妙之門。';
/** About 1.3 KB, like the prompt the defect was found with; and a long one, which the gateway tokenizes. */
const PROMPTS = { short: CLASSICAL_CHINESE.repeat(6), long: CLASSICAL_CHINESE.repeat(60) };
const CALLS = 200;
const CALLS_THE_CAP_PAYS_FOR = 20n;

function runOn(t: Test, storage: AppConfigInput['storage'] | undefined) {
  let g: MeteredGateway;

  t.before(async () => {
    // Loaded up front, so that the first long prompt is counted too rather than bounded by bytes.
    await loadEncoding('o200k_base');
    g = await startMeteredGateway(t, {
      storage,
      inference: {
        models: {
          // OpenAI's tokenizer declared (as for an Azure deployment of gpt-4o), and not (unknown: bytes).
          'cjk-o200k': { routes: [{ provider: 'primary', model: 'up-cjk' }], tokenizer: 'o200k_base', prices: TEST_PRICES },
          'cjk-unknown': { routes: [{ provider: 'primary', model: 'up-cjk' }], prices: TEST_PRICES },
        },
      },
    });
  });

  for (const model of ['cjk-o200k', 'cjk-unknown']) {
    for (const [size, prompt] of Object.entries(PROMPTS)) {
      t.test(`${CALLS} concurrent calls with a ${size} Chinese prompt on ${model} spend no more than a blocking total cap`, async (t) => {
        const messages = user(prompt);
        // What OpenAI's API reports for this prompt: o200k, with its chat framing.
        const promptTokens = gpt4oChatTokens(messages);
        t.ok(promptTokens > 3 + 4 + Math.ceil(Buffer.byteLength(prompt) / 4), `the upstream counts ${promptTokens} tokens, more than a quarter of the bytes`);
        const perCall = BigInt(promptTokens) * 1n + 1n * 2n;
        const cap = perCall * CALLS_THE_CAP_PAYS_FOR;
        const { id, key } = await g.newKey({ name: `${model} ${size}` });
        await g.patchKey(id, { spendCap: { usd: Number(cap) / 1e6, period: 'total', mode: 'blocking' } });
        g.upstream.reset();
        for (let i = 0; i < CALLS; i += 1) g.upstream.enqueue({ kind: 'reply', content: '道', usage: { prompt_tokens: promptTokens, completion_tokens: 1 } });

        const results = await Promise.all(Array.from({ length: CALLS }, () => g.chat(key, { model, messages, max_tokens: 1 })));
        const served = results.filter((r) => r.status === 200).length;
        const refused = results.filter((r) => r.status === 402 && r.body?.error?.code === 'budget_exceeded').length;
        t.equal(served + refused, CALLS, `every call is a 200 or a 402 budget_exceeded (got ${[...new Set(results.map((r) => r.status))].join(', ')})`);
        t.ok(served > 0, `some calls were served (${served})`);

        await g.flush();
        const spent = await g.loggedCost(id);
        t.equal(spent, perCall * BigInt(served), 'each served call cost what the upstream reported');
        t.ok(spent <= cap, `the key spent ${spent} µ$ of its ${cap} µ$ cap (${spent > cap ? `${spent - cap} µ$ over` : '0 over'})`);
      });
    }
  }
}

onEveryBackend(t, runOn);
