import type { RequestLogRow } from '../../core/ports/metering.ts';

let sequence = 0;

/**
 * A settled call's request-log row for tests that store, journal or queue rows: a JSON call that
 * cost 20 µ$, with a fresh id (`req_000001`, … in order) unless `overrides` names one.
 */
export function requestLogRow(overrides: Partial<RequestLogRow> = {}): RequestLogRow {
  sequence += 1;
  return {
    id: `req_${String(sequence).padStart(6, '0')}`,
    organizationId: '00000000-0000-4000-8000-000000000001',
    projectId: null,
    keyId: null,
    endpoint: '/v1/chat/completions',
    model: 'm',
    provider: 'p',
    upstreamModel: 'u',
    statusCode: 200,
    errorCode: null,
    inputTokens: 10,
    cachedInputTokens: 0,
    cacheWriteTokens: 0,
    outputTokens: 5,
    reasoningTokens: 0,
    usageEstimated: false,
    costMicros: 20n,
    priceVersion: 'v1',
    latencyMs: 3,
    ttftMs: null,
    streamed: false,
    attempts: 1,
    createdAt: new Date(),
    bodies: null,
    ...overrides,
  };
}
