import type { MeteredUnits } from '../../core/gateway/inference-admission.ts';
import type { RequestLogRow } from '../../core/ports/metering.ts';

/*
 * A request-log row as a flat JSON array: the one field order both the usage recorder's INSERT
 * (one JSON array per row, read back by position; a position past the array's end is null) and the
 * billing journal's records use.
 */

/** Column and its SQL type, in the order of each row's JSON array (rowValues). */
export const COLUMNS: ReadonlyArray<readonly [string, string]> = [
  ['id', 'text'],
  ['organization_id', 'uuid'],
  ['project_id', 'uuid'],
  ['key_id', 'uuid'],
  ['endpoint', 'text'],
  ['model', 'text'],
  ['provider', 'text'],
  ['upstream_model', 'text'],
  ['status_code', 'int4'],
  ['error_code', 'text'],
  ['input_tokens', 'int4'],
  ['cached_input_tokens', 'int4'],
  ['cache_write_tokens', 'int4'],
  ['output_tokens', 'int4'],
  ['reasoning_tokens', 'int4'],
  ['usage_estimated', 'bool'],
  ['cost_micros', 'int8'],
  ['price_version', 'text'],
  ['latency_ms', 'int4'],
  ['ttft_ms', 'int4'],
  ['streamed', 'bool'],
  ['attempts', 'int4'],
  ['created_at', 'timestamptz'],
  // What the call used besides tokens (metering migration 5), and those units' share of cost_micros.
  ['web_searches', 'int4'],
  ['images', 'int4'],
  ['image_size', 'text'],
  ['image_quality', 'text'],
  ['characters', 'int4'],
  ['audio_seconds', 'int4'],
  ['units_cost_micros', 'int8'],
  // A batch line's spend hold and batch (migration `metering-holds@1`); null for other calls.
  ['hold_id', 'uuid'],
  ['batch_id', 'text'],
];

/** How many of COLUMNS a row had before units were metered: the length of older journal records' rows. */
export const COLUMNS_BEFORE_UNITS = 23;

/** How many of COLUMNS a row has that is no batch line (rowValues leaves out hold_id and batch_id). */
export const COLUMNS_WITHOUT_HOLD = 30;

/**
 * A row as a JSON array in COLUMNS order: money as a string (JSON numbers are not exact past 2^53),
 * times as epoch milliseconds (cheaper to write and to read than ISO text). Appended to `into`
 * when given, so a record that frames the row (the journal's) builds one array, not two.
 */
export function rowValues(r: RequestLogRow, into: unknown[] = []): unknown[] {
  into.push(
    r.id,
    r.organizationId,
    r.projectId,
    r.keyId,
    r.endpoint,
    r.model,
    r.provider,
    r.upstreamModel,
    r.statusCode,
    r.errorCode,
    r.inputTokens,
    r.cachedInputTokens,
    r.cacheWriteTokens,
    r.outputTokens,
    r.reasoningTokens,
    r.usageEstimated,
    r.costMicros.toString(),
    r.priceVersion,
    r.latencyMs,
    r.ttftMs,
    r.streamed,
    r.attempts,
    r.createdAt.getTime(),
    r.units?.webSearches ?? 0,
    r.units?.images?.count ?? 0,
    r.units?.images?.size ?? null,
    r.units?.images?.quality ?? null,
    r.units?.characters ?? 0,
    r.units?.audioSeconds ?? 0,
    (r.unitsCostMicros ?? 0n).toString(),
  );
  // Only a batch line has them: every other row (and its journal record) keeps its length, and the
  // INSERT reads the missing positions as null.
  if (r.holdId !== undefined || r.batchId !== undefined) into.push(r.holdId ?? null, r.batchId ?? null);
  return into;
}

/** A row's units from its unit columns (zero counts are units the call did not use); undefined for none. */
export function unitsFromColumns(webSearches: unknown, images: unknown, imageSize: unknown, imageQuality: unknown, characters: unknown, audioSeconds: unknown): MeteredUnits | undefined {
  const units: MeteredUnits = {};
  if (Number(webSearches) > 0) units.webSearches = Number(webSearches);
  if (Number(images) > 0) units.images = { count: Number(images), size: String(imageSize ?? ''), quality: (imageQuality as string | null) ?? null };
  if (Number(characters) > 0) units.characters = Number(characters);
  if (Number(audioSeconds) > 0) units.audioSeconds = Number(audioSeconds);
  return Object.keys(units).length > 0 ? units : undefined;
}
