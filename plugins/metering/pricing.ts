import { createHash } from 'node:crypto';
import { usdToMicros } from '../../core/vocabulary/money.ts';
import type { Usage } from '../../core/gateway/provider.ts';
import type { MeteredUnits } from '../../core/gateway/inference-admission.ts';

export interface ModelPrices {
  inputPerMTokUsd: number;
  cachedInputPerMTokUsd?: number | undefined;
  cacheWritePerMTokUsd?: number | undefined;
  outputPerMTokUsd: number;
  perImageUsd?: number | undefined;
  /** Per generated image by size, then quality; a pair not listed falls back to perImageUsd. */
  images?: Record<string, Record<string, number>> | undefined;
  perAudioSecondUsd?: number | undefined;
  perCharacterUsd?: number | undefined;
  perWebSearchUsd?: number | undefined;
  /** A batch line's prices where they differ from these (batchPrices); absent: the same. */
  batch?: Partial<Omit<ModelPrices, 'batch'>> | undefined;
}

/**
 * A model's prices as integer rates. USD per million tokens equals pico-USD (1e-12) per token
 * times 1e-6, so `usdToMicros(usdPerMTok)` is the exact pico-USD price of one token. Prices per
 * unit (image, second, character, search) have at most six decimals (the config's usdAmount), so
 * their pico-USD rates are exact too. A unit's rate is null when the config gives it no price.
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
  /** perImageUsd: any size and quality the `images` table does not list. */
  picoPerImage: bigint | null;
  /** The `images` table: size → quality → pico-USD per image. */
  picoPerImageBySize: ReadonlyMap<string, ReadonlyMap<string, bigint>>;
  picoPerAudioSecond: bigint | null;
  picoPerCharacter: bigint | null;
  picoPerWebSearch: bigint | null;
}

const PICO_PER_MICRO = 1_000_000n;

const picoPerUnit = (usd: number | undefined): bigint | null => (usd === undefined ? null : usdToMicros(usd) * PICO_PER_MICRO);

/** The prices a live call pays: the config's, without the batch override. */
export function livePrices(prices: ModelPrices): ModelPrices {
  const { batch: _batch, ...live } = prices;
  return live;
}

/** The prices a batch line pays: the live ones with the config's `batch` fields over them. */
export function batchPrices(prices: ModelPrices): ModelPrices {
  const { batch, ...live } = prices;
  if (!batch) return live;
  const merged: ModelPrices = { ...live };
  for (const [field, value] of Object.entries(batch)) if (value !== undefined) Object.assign(merged, { [field]: value });
  return merged;
}

/** The live prices' sheet (a `batch` override is left out: batchSheet prices batch lines). */
export function priceSheet(model: string, config: ModelPrices): PriceSheet {
  const prices = livePrices(config);
  const bySize = new Map<string, Map<string, bigint>>();
  for (const [size, qualities] of Object.entries(prices.images ?? {})) {
    bySize.set(size, new Map(Object.entries(qualities).map(([quality, usd]) => [quality, usdToMicros(usd) * PICO_PER_MICRO])));
  }
  const input = usdToMicros(prices.inputPerMTokUsd);
  return {
    version: createHash('sha256')
      .update(`${model}\n${canonicalJson(prices)}`)
      .digest('hex')
      .slice(0, 16),
    model,
    prices,
    picoPerInputToken: input,
    // Unpriced cache reads and writes bill as ordinary input: never silently free.
    picoPerCachedInputToken: prices.cachedInputPerMTokUsd === undefined ? input : usdToMicros(prices.cachedInputPerMTokUsd),
    picoPerCacheWriteToken: prices.cacheWritePerMTokUsd === undefined ? input : usdToMicros(prices.cacheWritePerMTokUsd),
    picoPerOutputToken: usdToMicros(prices.outputPerMTokUsd),
    picoPerImage: picoPerUnit(prices.perImageUsd),
    picoPerImageBySize: bySize,
    picoPerAudioSecond: picoPerUnit(prices.perAudioSecondUsd),
    picoPerCharacter: picoPerUnit(prices.perCharacterUsd),
    picoPerWebSearch: picoPerUnit(prices.perWebSearchUsd),
  };
}

/** The sheet a batch line is billed with; the live sheet's own version when the model has no batch prices. */
export function batchSheet(model: string, config: ModelPrices, live: PriceSheet): PriceSheet {
  return config.batch ? priceSheet(model, batchPrices(config)) : live;
}

/** Keys sorted at every level: a price set's version does not depend on the config's key order. */
function canonicalJson(value: unknown): string {
  if (value === null || typeof value !== 'object') return JSON.stringify(value);
  const entries = Object.entries(value as Record<string, unknown>).sort(([a], [b]) => a.localeCompare(b));
  return JSON.stringify(Object.fromEntries(entries.map(([key, inner]) => [key, inner !== null && typeof inner === 'object' ? JSON.parse(canonicalJson(inner)) : inner])));
}

/** Rounds up to whole micro-USD: a call never bills less than it cost, and at most 1 µ$ more. */
function ceilToMicros(pico: bigint): bigint {
  return (pico + PICO_PER_MICRO - 1n) / PICO_PER_MICRO;
}

/** Audio is billed per started second: 2.1 s of audio bills 3 seconds. */
export function billedAudioSeconds(seconds: number): number {
  return Number.isFinite(seconds) && seconds > 0 ? Math.ceil(seconds) : 0;
}

const count = (n: number | undefined): bigint => (n !== undefined && Number.isFinite(n) && n > 0 ? BigInt(Math.ceil(n)) : 0n);

/** The price of one image of this size and quality: the `images` table's, else perImageUsd; null for neither. */
export function picoPerImageOf(sheet: PriceSheet, size: string, quality: string | null): bigint | null {
  const listed = quality === null ? undefined : sheet.picoPerImageBySize.get(size)?.get(quality);
  return listed ?? sheet.picoPerImage;
}

/** A unit a call would use that its model gives no price: the call is refused before anything is taken. */
export interface UnpricedUnit {
  unit: keyof MeteredUnits;
  /** The request field that asked for it. */
  param: string;
  message: string;
}

/**
 * The first unit of `units` (a call's estimate) that the sheet cannot price, or null when every
 * one has a price. Config load refuses models whose capabilities lack prices (see the metering
 * README), so this is the call path's check for a value the config did not foresee.
 */
export function unpricedUnit(units: MeteredUnits | undefined, sheet: PriceSheet): UnpricedUnit | null {
  if (!units) return null;
  const { model } = sheet;
  if (count(units.webSearches) > 0n && sheet.picoPerWebSearch === null) {
    return { unit: 'webSearches', param: 'tools', message: `Model ${model} has no price for web searches` };
  }
  const images = units.images;
  if (images && count(images.count) > 0n && picoPerImageOf(sheet, images.size, images.quality) === null) {
    const param = sheet.picoPerImageBySize.has(images.size) ? 'quality' : 'size';
    const which = images.quality === null ? `size ${images.size}` : `size ${images.size} and quality ${images.quality}`;
    return { unit: 'images', param, message: `Model ${model} has no price for images of ${which}` };
  }
  if (count(units.characters) > 0n && sheet.picoPerCharacter === null) {
    return { unit: 'characters', param: 'input', message: `Model ${model} has no price per character` };
  }
  if (billedAudioSeconds(units.audioSeconds ?? 0) > 0 && sheet.picoPerAudioSecond === null) {
    return { unit: 'audioSeconds', param: 'file', message: `Model ${model} has no price per second of audio` };
  }
  return null;
}

/** What the units cost in pico-USD; an unpriced unit adds nothing and is named in `unpriced`. */
function unitsPico(units: MeteredUnits | undefined, sheet: PriceSheet): { pico: bigint; unpriced: Array<keyof MeteredUnits> } {
  const unpriced: Array<keyof MeteredUnits> = [];
  let pico = 0n;
  if (!units) return { pico, unpriced };
  const add = (unit: keyof MeteredUnits, n: bigint, rate: bigint | null) => {
    if (n === 0n) return;
    if (rate === null) unpriced.push(unit);
    else pico += n * rate;
  };
  add('webSearches', count(units.webSearches), sheet.picoPerWebSearch);
  if (units.images) add('images', count(units.images.count), picoPerImageOf(sheet, units.images.size, units.images.quality));
  add('characters', count(units.characters), sheet.picoPerCharacter);
  add('audioSeconds', BigInt(billedAudioSeconds(units.audioSeconds ?? 0)), sheet.picoPerAudioSecond);
  return { pico, unpriced };
}

/** Usage follows OpenAI's convention: input includes cached and cache-write tokens. */
function tokensPico(usage: Usage, sheet: PriceSheet): bigint {
  const cached = BigInt(Math.max(0, usage.cachedInputTokens));
  const written = BigInt(Math.max(0, usage.cacheWriteTokens));
  const plainInput = BigInt(Math.max(0, usage.inputTokens - usage.cachedInputTokens - usage.cacheWriteTokens));
  const output = BigInt(Math.max(0, usage.outputTokens));
  return plainInput * sheet.picoPerInputToken + cached * sheet.picoPerCachedInputToken + written * sheet.picoPerCacheWriteToken + output * sheet.picoPerOutputToken;
}

/** Cost of one call's tokens (and units, when given), rounded up once. */
export function costMicros(usage: Usage, sheet: PriceSheet, units?: MeteredUnits): bigint {
  return ceilToMicros(tokensPico(usage, sheet) + unitsPico(units, sheet).pico);
}

export interface CallCost {
  /** What the call is billed: tokens and units together, rounded up once. */
  costMicros: bigint;
  /** The units' share of it (their cost rounded up, never more than the whole). */
  unitsCostMicros: bigint;
  /** Units the call used that the sheet has no price for (billed nothing: config load prevents it). */
  unpriced: Array<keyof MeteredUnits>;
}

/** A settled call's bill: its usage (none when no upstream answer had any) and its units. */
export function callCost(usage: Usage | null, units: MeteredUnits | undefined, sheet: PriceSheet): CallCost {
  const { pico, unpriced } = unitsPico(units, sheet);
  const total = ceilToMicros((usage ? tokensPico(usage, sheet) : 0n) + pico);
  // ceil(a + b) >= ceil(b) for a >= 0: the tokens' share (the rest) is never negative.
  return { costMicros: total, unitsCostMicros: ceilToMicros(pico), unpriced };
}

/**
 * Upper bound before the call: all input at its dearest rate (a cache write may cost more than
 * plain input, 1.25 times at Anthropic), all allowed output, and the largest count of every unit
 * the call may use (unpricedUnit refuses a unit with no price before this is asked).
 */
export function estimateCostMicros(estimate: { inputTokens: number; maxOutputTokens: number; units?: MeteredUnits | undefined }, sheet: PriceSheet): bigint {
  let input = sheet.picoPerInputToken;
  if (sheet.picoPerCacheWriteToken > input) input = sheet.picoPerCacheWriteToken;
  if (sheet.picoPerCachedInputToken > input) input = sheet.picoPerCachedInputToken;
  const tokens = BigInt(estimate.inputTokens) * input + BigInt(estimate.maxOutputTokens) * sheet.picoPerOutputToken;
  return ceilToMicros(tokens + unitsPico(estimate.units, sheet).pico);
}
