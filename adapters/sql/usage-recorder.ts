import type { Database } from '../../core/ports/database.ts';
import type { RequestLogRow, UsageRecorder } from '../../core/ports/metering.ts';
import { appendLine } from './credit-ledger-store.ts';

/** Column, its array type for unnest(), and how a row gives its value. */
const COLUMNS: ReadonlyArray<readonly [string, string, (row: RequestLogRow) => unknown]> = [
  ['id', 'text', (r) => r.id],
  ['organization_id', 'uuid', (r) => r.organizationId],
  ['project_id', 'uuid', (r) => r.projectId],
  ['key_id', 'uuid', (r) => r.keyId],
  ['endpoint', 'text', (r) => r.endpoint],
  ['model', 'text', (r) => r.model],
  ['provider', 'text', (r) => r.provider],
  ['upstream_model', 'text', (r) => r.upstreamModel],
  ['status_code', 'int4', (r) => r.statusCode],
  ['error_code', 'text', (r) => r.errorCode],
  ['input_tokens', 'int4', (r) => r.inputTokens],
  ['cached_input_tokens', 'int4', (r) => r.cachedInputTokens],
  ['cache_write_tokens', 'int4', (r) => r.cacheWriteTokens],
  ['output_tokens', 'int4', (r) => r.outputTokens],
  ['reasoning_tokens', 'int4', (r) => r.reasoningTokens],
  ['usage_estimated', 'bool', (r) => r.usageEstimated],
  ['cost_micros', 'int8', (r) => r.costMicros.toString()],
  ['price_version', 'text', (r) => r.priceVersion],
  ['latency_ms', 'int4', (r) => r.latencyMs],
  ['ttft_ms', 'int4', (r) => r.ttftMs],
  ['streamed', 'bool', (r) => r.streamed],
  ['attempts', 'int4', (r) => r.attempts],
  ['created_at', 'timestamptz', (r) => r.createdAt.toISOString()],
];

// One array parameter per column: the statement text and its plan stay the same whatever the
// batch size, and the driver sends 23 values instead of 23 per row.
const INSERT_ROWS = `INSERT INTO request_logs (${COLUMNS.map(([name]) => name).join(', ')})
  SELECT * FROM unnest(${COLUMNS.map(([, type], i) => `$${i + 1}::${type}[]`).join(', ')})
  ON CONFLICT (id) DO NOTHING RETURNING id`;

/** jsonb cannot hold U+0000; bodies are kept for reading, so a replacement character stands in. */
function jsonForStorage(value: unknown): string {
  return JSON.stringify(value ?? null).replaceAll('\\u0000', '\\ufffd');
}

/**
 * Writes a batch of calls and their charges in one transaction: the rows (a row already stored,
 * e.g. a retried flush, is skipped), then one ai_usage line per organisation for exactly the rows
 * that were new, in organisation order so concurrent flushes never deadlock on balance rows.
 */
export class SqlUsageRecorder implements UsageRecorder {
  constructor(private readonly db: Database) {}

  async record(rows: RequestLogRow[]): Promise<number> {
    if (rows.length === 0) return 0;
    return this.db.transaction(async (tx) => {
      const inserted = await tx.query<{ id: string }>(INSERT_ROWS, COLUMNS.map(([, , value]) => rows.map(value)));
      const fresh = new Set(inserted.rows.map((row) => row.id));
      const charges = new Map<string, { micros: bigint; calls: number }>();
      for (const row of rows) {
        if (!fresh.has(row.id)) continue;
        const charge = charges.get(row.organizationId) ?? { micros: 0n, calls: 0 };
        charge.micros += row.costMicros;
        charge.calls += 1;
        charges.set(row.organizationId, charge);
        if (row.bodies) {
          await tx.query('INSERT INTO request_log_bodies (request_id, request_body, response_body) VALUES ($1, $2::jsonb, $3::jsonb)', [
            row.id,
            jsonForStorage(row.bodies.request),
            jsonForStorage(row.bodies.response),
          ]);
        }
      }
      for (const organizationId of [...charges.keys()].sort()) {
        const { micros, calls } = charges.get(organizationId)!;
        if (micros === 0n) continue;
        await appendLine(tx, organizationId, {
          kind: 'ai_usage',
          amountMicros: -micros,
          note: `${calls} model call${calls === 1 ? '' : 's'}`,
          coversEntries: calls,
        });
      }
      return fresh.size;
    });
  }
}
