import { performance } from 'node:perf_hooks';
import { OutboundHttpError, type OutboundHttpClient } from '../../core/net/outbound-http-client.ts';
import type { SecretValue } from '../../core/services/secret-vault.ts';
import type { AttemptRecord } from './delivery-store.ts';
import { retryAfterMs } from './retry-schedule.ts';
import { signedHeaders } from './signing.ts';

/** What one attempt needs: where, the message and its id, and the secrets that sign it (the current one first). */
export interface AttemptTarget {
  url: string;
  messageId: string;
  body: string;
  secrets: readonly SecretValue[];
}

export interface AttemptSettings {
  timeoutMs: number;
  responseBodyBytes: number;
}

/** An attempt as sent and answered; the caller decides what follows (`nextAttemptAt`). */
export interface AttemptOutcome extends Omit<AttemptRecord, 'nextAttemptAt'> {
  /** What the receiver's retry-after asked for, in milliseconds from the attempt. */
  retryAfterMs: number | null;
}

/** Identifies us to receivers, who may filter on it. */
const USER_AGENT = 'svc-webhooks/1';

/**
 * One attempt through the kernel's outbound client, so the SSRF guard runs again on the address
 * dialled (a name that now resolves to a private address fails `refused_address`), redirects are
 * not followed (a 3xx is a failure: the receiver must answer at the URL it gave), and the answer is
 * bounded by the timeout and kept only up to `responseBodyBytes`. A 2xx is a success; any other
 * answer or a transport failure is a failed attempt. Cancellation through `signal` (the job's:
 * shutdown, lost lease) is thrown, not recorded: the attempt did not finish.
 */
export async function sendAttempt(http: OutboundHttpClient, settings: AttemptSettings, target: AttemptTarget, at: Date, signal?: AbortSignal): Promise<AttemptOutcome> {
  const headers = {
    'content-type': 'application/json',
    'user-agent': USER_AGENT,
    ...signedHeaders(
      target.secrets.map((secret) => secret.reveal()),
      target.messageId,
      at,
      target.body,
    ),
  };
  const started = performance.now();
  try {
    const answer = await http.request({
      url: target.url,
      method: 'POST',
      headers,
      body: target.body,
      ...(signal ? { signal } : {}),
      totalTimeoutMs: settings.timeoutMs,
      maxResponseBytes: settings.responseBodyBytes,
      whenTooLarge: 'keep-start',
    });
    const succeeded = answer.status >= 200 && answer.status < 300;
    const redirect = answer.status >= 300 && answer.status < 400;
    return {
      attemptedAt: at,
      succeeded,
      statusCode: answer.status,
      durationMs: answer.durationMs,
      responseBody: storableText(answer.body),
      responseTruncated: answer.truncated,
      errorKind: succeeded ? null : redirect ? 'redirect' : 'http_status',
      errorMessage: succeeded ? null : redirect ? `HTTP ${answer.status}: redirects are not followed` : `HTTP ${answer.status}`,
      retryAfterMs: succeeded ? null : retryAfterMs(answer.headers['retry-after'], at),
    };
  } catch (error) {
    if (!(error instanceof OutboundHttpError) || error.kind === 'aborted') throw signal?.aborted ? signal.reason : error;
    return {
      attemptedAt: at,
      succeeded: false,
      statusCode: null,
      durationMs: performance.now() - started,
      responseBody: null,
      responseTruncated: false,
      errorKind: error.kind,
      // The client's messages name the method and origin, never the path, query, headers or body.
      errorMessage: error.message,
      retryAfterMs: null,
    };
  }
}

/** UTF-8 as text a PostgreSQL column holds: no NUL (U+FFFD in its place, as undecodable bytes get). */
function storableText(body: Buffer): string {
  return body.toString('utf8').replaceAll('\u0000', '\uFFFD');
}

/** One line for logs and the job's error: the status or the failure kind, never the body. */
export function attemptSummary(outcome: AttemptOutcome): string {
  return outcome.errorMessage ?? `HTTP ${outcome.statusCode}`;
}
