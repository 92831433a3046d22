import t from 'tap';
import { costMicros, estimateCostMicros, priceSheet } from '../../../plugins/metering/pricing.ts';

t.test('the reservation prices input at its dearest rate: cache writes may cost more than plain input', async (t) => {
  // Anthropic's: a cache write costs 1.25 times plain input.
  const sheet = priceSheet('claude', { inputPerMTokUsd: 3, cachedInputPerMTokUsd: 0.3, cacheWritePerMTokUsd: 3.75, outputPerMTokUsd: 15 });
  const written = costMicros({ inputTokens: 10_000, cachedInputTokens: 0, cacheWriteTokens: 10_000, outputTokens: 100, reasoningTokens: 0, estimated: false }, sheet);
  const reserved = estimateCostMicros({ inputTokens: 10_000, maxOutputTokens: 100 }, sheet);
  t.ok(reserved >= written, `reserved ${reserved} µ$ ≥ ${written} µ$ for a prompt written to the cache whole`);
});

const usage = (fields: { input: number; cached?: number; written?: number; output: number }) => ({
  inputTokens: fields.input,
  cachedInputTokens: fields.cached ?? 0,
  cacheWriteTokens: fields.written ?? 0,
  outputTokens: fields.output,
  reasoningTokens: 0,
  estimated: false,
});

t.test('a call costs its input and output tokens at their rates, in exact micro-USD', async (t) => {
  const sheet = priceSheet('m', { inputPerMTokUsd: 3, outputPerMTokUsd: 15 });
  t.equal(costMicros(usage({ input: 1000, output: 100 }), sheet), 4_500n, '1000 × $3/M + 100 × $15/M');
  t.equal(costMicros(usage({ input: 0, output: 0 }), sheet), 0n);
});

t.test('cached and cache-write tokens are part of the input and bill at their own rates', async (t) => {
  const sheet = priceSheet('claude', { inputPerMTokUsd: 3, cachedInputPerMTokUsd: 0.3, cacheWritePerMTokUsd: 3.75, outputPerMTokUsd: 15 });
  // 500 plain × 3 + 400 cached × 0.3 + 100 written × 3.75 + 10 output × 15 (µ$ per thousand tokens)
  t.equal(costMicros(usage({ input: 1000, cached: 400, written: 100, output: 10 }), sheet), 2_145n);
});

t.test('unpriced cache reads and writes bill as ordinary input, never free', async (t) => {
  const sheet = priceSheet('m', { inputPerMTokUsd: 3, outputPerMTokUsd: 15 });
  t.equal(sheet.picoPerCachedInputToken, sheet.picoPerInputToken);
  t.equal(sheet.picoPerCacheWriteToken, sheet.picoPerInputToken);
  t.equal(costMicros(usage({ input: 1000, cached: 400, written: 100, output: 10 }), sheet), 3_150n);
});

t.test('a cost is rounded up to whole micro-USD, by less than one', async (t) => {
  const sheet = priceSheet('m', { inputPerMTokUsd: 0.5, outputPerMTokUsd: 0 });
  t.equal(costMicros(usage({ input: 1, output: 0 }), sheet), 1n, '0.5 µ$ bills 1');
  t.equal(costMicros(usage({ input: 2, output: 0 }), sheet), 1n, '1 µ$ exactly bills 1');
  t.equal(costMicros(usage({ input: 3, output: 0 }), sheet), 2n, '1.5 µ$ bills 2');
});

t.test('negative or inconsistent token counts never bill below zero for any part', async (t) => {
  const sheet = priceSheet('m', { inputPerMTokUsd: 1, cachedInputPerMTokUsd: 1, cacheWritePerMTokUsd: 1, outputPerMTokUsd: 1 });
  t.equal(costMicros(usage({ input: -5, cached: -1, written: -1, output: -3 }), sheet), 0n);
  t.equal(costMicros(usage({ input: 10, cached: 20, output: 0 }), sheet), 20n, 'more cached than input: the cached tokens, no negative rest');
});

t.test('the reservation takes the dearest input rate of plain, cached and cache-write, and all allowed output', async (t) => {
  const estimate = { inputTokens: 1000, maxOutputTokens: 0 };
  t.equal(estimateCostMicros(estimate, priceSheet('a', { inputPerMTokUsd: 5, cachedInputPerMTokUsd: 1, cacheWritePerMTokUsd: 2, outputPerMTokUsd: 0 })), 5_000n);
  t.equal(estimateCostMicros(estimate, priceSheet('b', { inputPerMTokUsd: 1, cachedInputPerMTokUsd: 0.5, cacheWritePerMTokUsd: 4, outputPerMTokUsd: 0 })), 4_000n);
  t.equal(estimateCostMicros(estimate, priceSheet('c', { inputPerMTokUsd: 1, cachedInputPerMTokUsd: 2, cacheWritePerMTokUsd: 0.5, outputPerMTokUsd: 0 })), 2_000n);
  t.equal(estimateCostMicros({ inputTokens: 0, maxOutputTokens: 100 }, priceSheet('d', { inputPerMTokUsd: 1, outputPerMTokUsd: 10 })), 1_000n);
  t.equal(estimateCostMicros({ inputTokens: 1, maxOutputTokens: 0 }, priceSheet('e', { inputPerMTokUsd: 0.5, outputPerMTokUsd: 0 })), 1n, 'rounded up');
});

t.test("a price sheet's version names the model and its prices, whatever their order", async (t) => {
  const sheet = priceSheet('m', { inputPerMTokUsd: 3, outputPerMTokUsd: 15 });
  t.match(sheet.version, /^[0-9a-f]{16}$/);
  t.equal(priceSheet('m', { outputPerMTokUsd: 15, inputPerMTokUsd: 3 }).version, sheet.version, 'key order does not matter');
  t.not(priceSheet('n', { inputPerMTokUsd: 3, outputPerMTokUsd: 15 }).version, sheet.version, 'another model');
  t.not(priceSheet('m', { inputPerMTokUsd: 3, outputPerMTokUsd: 16 }).version, sheet.version, 'another price');
  t.same([sheet.model, sheet.prices], ['m', { inputPerMTokUsd: 3, outputPerMTokUsd: 15 }]);
});
