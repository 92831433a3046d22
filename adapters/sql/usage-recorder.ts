import type { Database } from '../../core/ports/database.ts';
import type { RequestLogRow, UsageRecorder } from '../../core/ports/metering.ts';
import { appendLine } from './credit-ledger-store.ts';

const COLUMNS = [
  'id', 'organization_id', 'project_id', 'key_id', 'endpoint', 'model', 'provider', 'upstream_model', 'status_code',
  'error_code', 'input_tokens', 'cached_input_tokens', 'cache_write_tokens', 'output_tokens', 'reasoning_tokens',
  'usage_estimated', 'cost_micros', 'price_version', 'latency_ms', 'ttft_ms', 'streamed', 'attempts', 'created_at',
] as const;

const values = (row: RequestLogRow): unknown[] => [
  row.id, row.organizationId, row.projectId, row.keyId, row.endpoint, row.model, row.provider, row.upstreamModel, row.statusCode,
  row.errorCode, row.inputTokens, row.cachedInputTokens, row.cacheWriteTokens, row.outputTokens, row.reasoningTokens,
  row.usageEstimated, row.costMicros, row.priceVersion, row.latencyMs, row.ttftMs, row.streamed, row.attempts, row.createdAt,
];

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
      const params: unknown[] = [];
      const tuples = rows.map((row) => {
        const start = params.length;
        params.push(...values(row));
        return `(${COLUMNS.map((_, i) => `$${start + i + 1}`).join(', ')})`;
      });
      const inserted = await tx.query<{ id: string }>(
        `INSERT INTO request_logs (${COLUMNS.join(', ')}) VALUES ${tuples.join(', ')} ON CONFLICT (id) DO NOTHING RETURNING id`,
        params,
      );
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
