import { createHash } from 'node:crypto';
import { usdToMicros } from '../../core/vocabulary/money.ts';
import type { Usage } from '../../core/gateway/provider.ts';

export interface ModelPrices {
  inputPerMTokUsd: number;
  cachedInputPerMTokUsd?: number;
  cacheWritePerMTokUsd?: number;
  outputPerMTokUsd: number;
  perImageUsd?: number;
  perAudioSecondUsd?: number;
  perCharacterUsd?: number;
  perWebSearchUsd?: number;
}

/**
 * A model's prices as integer rates. USD per million tokens equals pico-USD (1e-12) per token
 * times 1e-6, so `usdToMicros(usdPerMTok)` is the exact pico-USD price of one token.
 */
export interface PriceSheet {
  /** Content hash of model + prices: what a request-log row records as price_version. */
  version: string;
  model: string;
  prices: ModelPrices;
  picoPerInputToken: bigint;
  picoPerCachedInputToken: bigint;
  picoPerCacheWriteToken: bigint;
  picoPerOutputToken: bigint;
}

const PICO_PER_MICRO = 1_000_000n;

export function priceSheet(model: string, prices: ModelPrices): PriceSheet {
  const canonical = JSON.stringify(Object.fromEntries(Object.entries(prices).sort(([a], [b]) => a.localeCompare(b))));
  const input = usdToMicros(prices.inputPerMTokUsd);
  return {
    version: createHash('sha256').update(`${model}\n${canonical}`).digest('hex').slice(0, 16),
    model,
    prices,
    picoPerInputToken: input,
    // Unpriced cache reads and writes bill as ordinary input: never silently free.
    picoPerCachedInputToken: prices.cachedInputPerMTokUsd === undefined ? input : usdToMicros(prices.cachedInputPerMTokUsd),
    picoPerCacheWriteToken: prices.cacheWritePerMTokUsd === undefined ? input : usdToMicros(prices.cacheWritePerMTokUsd),
    picoPerOutputToken: usdToMicros(prices.outputPerMTokUsd),
  };
}

/** Rounds up to whole micro-USD: a call never bills less than it cost, and at most 1 µ$ more. */
function ceilToMicros(pico: bigint): bigint {
  return (pico + PICO_PER_MICRO - 1n) / PICO_PER_MICRO;
}

/** Cost of one call. Usage follows OpenAI's convention: input includes cached and cache-write tokens. */
export function costMicros(usage: Usage, sheet: PriceSheet): bigint {
  const cached = BigInt(Math.max(0, usage.cachedInputTokens));
  const written = BigInt(Math.max(0, usage.cacheWriteTokens));
  const plainInput = BigInt(Math.max(0, usage.inputTokens - usage.cachedInputTokens - usage.cacheWriteTokens));
  const output = BigInt(Math.max(0, usage.outputTokens));
  return ceilToMicros(plainInput * sheet.picoPerInputToken + cached * sheet.picoPerCachedInputToken + written * sheet.picoPerCacheWriteToken + output * sheet.picoPerOutputToken);
}

/**
 * Upper bound before the call: all input at its dearest rate (a cache write may cost more than
 * plain input, 1.25 times at Anthropic), all allowed output.
 */
export function estimateCostMicros(estimate: { inputTokens: number; maxOutputTokens: number }, sheet: PriceSheet): bigint {
  let input = sheet.picoPerInputToken;
  if (sheet.picoPerCacheWriteToken > input) input = sheet.picoPerCacheWriteToken;
  if (sheet.picoPerCachedInputToken > input) input = sheet.picoPerCachedInputToken;
  return ceilToMicros(BigInt(estimate.inputTokens) * input + BigInt(estimate.maxOutputTokens) * sheet.picoPerOutputToken);
}
