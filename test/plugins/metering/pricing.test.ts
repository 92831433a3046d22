import t from 'tap';
import { costMicros, estimateCostMicros, priceSheet } from '../../../plugins/metering/pricing.ts';

t.test('the reservation prices input at its dearest rate: cache writes may cost more than plain input', async (t) => {
  // Anthropic's: a cache write costs 1.25 times plain input.
  const sheet = priceSheet('claude', { inputPerMTokUsd: 3, cachedInputPerMTokUsd: 0.3, cacheWritePerMTokUsd: 3.75, outputPerMTokUsd: 15 });
  const written = costMicros({ inputTokens: 10_000, cachedInputTokens: 0, cacheWriteTokens: 10_000, outputTokens: 100, reasoningTokens: 0, estimated: false }, sheet);
  const reserved = estimateCostMicros({ inputTokens: 10_000, maxOutputTokens: 100 }, sheet);
  t.ok(reserved >= written, `reserved ${reserved} µ$ ≥ ${written} µ$ for a prompt written to the cache whole`);
});
