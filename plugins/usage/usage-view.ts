import type { z } from 'zod';
import { microsToUsd } from '../../core/vocabulary/money.ts';
import type { comparisonView, requestRowView, requestUnitsView, totalsView, windowView } from './usage-schemas.ts';
import type { CallSums, ModelSeriesBucket, RequestLog, SeriesBucket, UsageTotals, WindowStats } from '../../core/ports/metering.ts';

/** Store records to wire shapes: USD numbers from integer micros, ISO timestamps. */

type Tokens = Pick<UsageTotals, 'inputTokens' | 'cachedInputTokens' | 'cacheWriteTokens' | 'outputTokens' | 'reasoningTokens'>;

const tokensOf = (t: Tokens) => ({
  input: t.inputTokens,
  cachedInput: t.cachedInputTokens,
  cacheWrite: t.cacheWriteTokens,
  output: t.outputTokens,
  reasoning: t.reasoningTokens,
});

type UnitSums = Pick<UsageTotals, 'webSearches' | 'images' | 'characters' | 'audioSeconds' | 'unitsCostMicros'>;

const unitsOf = (u: UnitSums) => ({
  webSearches: u.webSearches,
  images: u.images,
  characters: u.characters,
  audioSeconds: u.audioSeconds,
  costUsd: microsToUsd(u.unitsCostMicros),
});

function requestUnits(row: RequestLog): z.infer<typeof requestUnitsView> {
  const units = row.units ?? {};
  return {
    webSearches: units.webSearches ?? 0,
    images: units.images ? { count: units.images.count, size: units.images.size, quality: units.images.quality } : null,
    characters: units.characters ?? 0,
    audioSeconds: units.audioSeconds ?? 0,
    costUsd: microsToUsd(row.unitsCostMicros ?? 0n),
  };
}

export function toRequestRowView(row: RequestLog): z.infer<typeof requestRowView> {
  return {
    object: 'request_log',
    id: row.id,
    createdAt: row.createdAt.toISOString(),
    keyId: row.keyId,
    projectId: row.projectId,
    endpoint: row.endpoint,
    model: row.model,
    provider: row.provider,
    upstreamModel: row.upstreamModel,
    status: row.statusCode,
    errorCode: row.errorCode,
    tokens: { ...tokensOf(row), estimated: row.usageEstimated },
    units: requestUnits(row),
    costUsd: microsToUsd(row.costMicros),
    latencyMs: row.latencyMs,
    ttftMs: row.ttftMs,
    streamed: row.streamed,
    attempts: row.attempts,
    priceVersion: row.priceVersion,
    ...(row.batchId !== undefined ? { batchId: row.batchId } : {}),
  };
}

export function toTotalsView(totals: UsageTotals): z.infer<typeof totalsView> {
  return {
    requests: totals.requests,
    errors: totals.errors,
    tokens: tokensOf(totals),
    units: unitsOf(totals),
    costUsd: microsToUsd(totals.costMicros),
    avgLatencyMs: totals.avgLatencyMs,
    p50LatencyMs: totals.p50LatencyMs,
    p95LatencyMs: totals.p95LatencyMs,
  };
}

/** A bucket's figures, whole or one model's share. */
function callView(sums: CallSums) {
  return { requests: sums.requests, errors: sums.errors, tokens: tokensOf(sums), units: unitsOf(sums), costUsd: microsToUsd(sums.costMicros) };
}

export function toModelBucketView(bucket: ModelSeriesBucket) {
  return { model: bucket.model, ...callView(bucket) };
}

export function toSeriesBucketView(bucket: SeriesBucket) {
  return { start: bucket.start.toISOString(), ...callView(bucket) };
}

export function toWindowStatsView(stats: WindowStats): Omit<z.infer<typeof windowView>['buckets'][number], 'start'> {
  return {
    requests: stats.requests,
    errors: stats.errors,
    costUsd: microsToUsd(stats.costMicros),
    p50LatencyMs: stats.p50LatencyMs,
    p95LatencyMs: stats.p95LatencyMs,
    p50TtftMs: stats.p50TtftMs,
  };
}

type Delta = { absolute: number | null; percent: number | null };
const round2 = (value: number) => Math.round(value * 100) / 100;

function delta(current: number | null, previous: number | null): Delta {
  if (current === null || previous === null) return { absolute: null, percent: null };
  return { absolute: round2(current - previous), percent: previous === 0 ? null : round2(((current - previous) / previous) * 100) };
}

function moneyDelta(current: bigint, previous: bigint): Delta {
  const change = current - previous;
  return { absolute: microsToUsd(change), percent: previous === 0n ? null : round2((Number(change) / Number(previous)) * 100) };
}

export function toDeltasView(current: UsageTotals, previous: UsageTotals): z.infer<typeof comparisonView>['deltas'] {
  return {
    requests: delta(current.requests, previous.requests),
    errors: delta(current.errors, previous.errors),
    tokens: {
      input: delta(current.inputTokens, previous.inputTokens),
      cachedInput: delta(current.cachedInputTokens, previous.cachedInputTokens),
      cacheWrite: delta(current.cacheWriteTokens, previous.cacheWriteTokens),
      output: delta(current.outputTokens, previous.outputTokens),
      reasoning: delta(current.reasoningTokens, previous.reasoningTokens),
    },
    costUsd: moneyDelta(current.costMicros, previous.costMicros),
    avgLatencyMs: delta(current.avgLatencyMs, previous.avgLatencyMs),
    p50LatencyMs: delta(current.p50LatencyMs, previous.p50LatencyMs),
    p95LatencyMs: delta(current.p95LatencyMs, previous.p95LatencyMs),
  };
}
