import t from 'tap';
import { uncoveredPrices } from '../../../plugins/metering/price-coverage.ts';
import { callCost, costMicros, estimateCostMicros, priceSheet, unpricedUnit } from '../../../plugins/metering/pricing.ts';

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

t.test('a sheet priced before units were keeps its version: what request-log rows already name', async (t) => {
  t.equal(priceSheet('m', { inputPerMTokUsd: 1, outputPerMTokUsd: 2, cachedInputPerMTokUsd: 0.5 }).version, '74e63d22899edd25');
  const images: Record<string, Record<string, number>> = { '1024x1024': { hd: 0.08, standard: 0.04 }, '512x512': { standard: 0.02 } };
  const reordered: Record<string, Record<string, number>> = { '512x512': { standard: 0.02 }, '1024x1024': { standard: 0.04, hd: 0.08 } };
  const version = priceSheet('p', { inputPerMTokUsd: 1, outputPerMTokUsd: 2, images }).version;
  t.equal(priceSheet('p', { inputPerMTokUsd: 1, outputPerMTokUsd: 2, images: reordered }).version, version, 'the images table’s order does not matter either');
  const dearer = { ...images, '512x512': { standard: 0.03 } };
  t.not(priceSheet('p', { inputPerMTokUsd: 1, outputPerMTokUsd: 2, images: dearer }).version, version, 'its prices do');
});

const UNIT_PRICES = {
  inputPerMTokUsd: 1,
  outputPerMTokUsd: 2,
  perImageUsd: 0.02,
  images: { '1024x1024': { standard: 0.04, hd: 0.08 } },
  perAudioSecondUsd: 0.0001,
  perCharacterUsd: 0.000015,
  perWebSearchUsd: 0.01,
};

t.test('a call costs its tokens and each of its units at the model’s rate, rounded up once', async (t) => {
  const sheet = priceSheet('u', UNIT_PRICES);
  t.equal(costMicros(usage({ input: 1, output: 0 }), sheet, { webSearches: 3 }), 30_001n, 'searches on top of tokens');
  t.equal(costMicros(usage({ input: 0, output: 0 }), sheet, { images: { count: 2, size: '1024x1024', quality: 'hd' } }), 160_000n, 'by size and quality');
  t.equal(costMicros(usage({ input: 0, output: 0 }), sheet, { images: { count: 1, size: '512x512', quality: 'hd' } }), 20_000n, 'a pair not listed: perImageUsd');
  t.equal(costMicros(usage({ input: 0, output: 0 }), sheet, { images: { count: 1, size: '1024x1024', quality: null } }), 20_000n, 'no quality: perImageUsd');
  t.equal(costMicros(usage({ input: 0, output: 0 }), sheet, { characters: 7 }), 105n);
  t.equal(costMicros(usage({ input: 0, output: 0 }), sheet, { audioSeconds: 2.01 }), 300n, 'audio per started second');
  const half = priceSheet('h', { inputPerMTokUsd: 0.5, outputPerMTokUsd: 0, perCharacterUsd: 0.000001 });
  t.equal(costMicros(usage({ input: 1, output: 0 }), half, { characters: 1 }), 2n, '0.5 µ$ of tokens and 1 µ$ of characters bill 2, not 3');
});

t.test('callCost names the units’ share of the bill, and never more than the bill', async (t) => {
  const sheet = priceSheet('u', UNIT_PRICES);
  t.same(callCost(usage({ input: 10, output: 5 }), { webSearches: 1 }, sheet), { costMicros: 10_020n, unitsCostMicros: 10_000n, unpriced: [] });
  t.same(callCost(null, undefined, sheet), { costMicros: 0n, unitsCostMicros: 0n, unpriced: [] });
  const bare = priceSheet('b', { inputPerMTokUsd: 1, outputPerMTokUsd: 1 });
  t.same(callCost(usage({ input: 1, output: 0 }), { webSearches: 2 }, bare), { costMicros: 1n, unitsCostMicros: 0n, unpriced: ['webSearches'] }, 'an unpriced unit is reported');
});

t.test('the reservation prices the largest count of every unit the call may use', async (t) => {
  const sheet = priceSheet('u', UNIT_PRICES);
  t.equal(estimateCostMicros({ inputTokens: 10, maxOutputTokens: 10, units: { webSearches: 5 } }, sheet), 50_030n);
  t.equal(estimateCostMicros({ inputTokens: 0, maxOutputTokens: 0, units: { images: { count: 4, size: '1024x1024', quality: 'standard' }, audioSeconds: 0.5 } }, sheet), 160_100n);
});

t.test('unpricedUnit names the first unit with no price and the request field that asked for it', async (t) => {
  const bare = priceSheet('b', { inputPerMTokUsd: 1, outputPerMTokUsd: 1, images: { '1024x1024': { standard: 0.04 } } });
  t.equal(unpricedUnit(undefined, bare), null);
  t.equal(unpricedUnit({ webSearches: 0 }, bare), null, 'a count of zero needs no price');
  t.match(unpricedUnit({ webSearches: 1 }, bare), { unit: 'webSearches', param: 'tools' });
  t.match(unpricedUnit({ images: { count: 1, size: '1024x1024', quality: 'hd' } }, bare), { unit: 'images', param: 'quality', message: /1024x1024 and quality hd/ });
  t.match(unpricedUnit({ images: { count: 1, size: '256x256', quality: 'standard' } }, bare), { unit: 'images', param: 'size' });
  t.equal(unpricedUnit({ images: { count: 1, size: '1024x1024', quality: 'standard' } }, bare), null);
  t.match(unpricedUnit({ characters: 3 }, bare), { unit: 'characters', param: 'input' });
  t.match(unpricedUnit({ audioSeconds: 0.1 }, bare), { unit: 'audioSeconds', param: 'file' });
});

t.test('a model’s capabilities must all be priced: every image size × quality, speech, transcription, web search', async (t) => {
  const capabilities = {
    images: { sizes: ['1024x1024', '512x512'], qualities: ['standard', 'hd'], maxImages: 4 },
    speech: { voices: ['alloy'], formats: ['mp3' as const], maxInputCharacters: 4096 },
    transcription: { formats: ['json' as const] },
    builtinTools: { webSearch: { reservePerCall: 5 } },
  };
  t.same(uncoveredPrices(capabilities, priceSheet('u', UNIT_PRICES)), [], 'perImageUsd covers what the table does not list');
  const gaps = uncoveredPrices(capabilities, priceSheet('b', { inputPerMTokUsd: 1, outputPerMTokUsd: 1, images: { '1024x1024': { standard: 0.04, hd: 0.08 } } }));
  t.same(
    gaps.map((gap) => gap.split(':')[0]),
    ['images.512x512.standard', 'images.512x512.hd', 'perCharacterUsd', 'perAudioSecondUsd', 'perWebSearchUsd'],
  );
  t.same(uncoveredPrices({ builtinTools: {} }, priceSheet('t', { inputPerMTokUsd: 1, outputPerMTokUsd: 1 })), [], 'a text model needs token prices only');
});
