import type { IncomingHttpHeaders } from 'node:http';
import { errors } from 'undici';
import { UpstreamError, type UpstreamErrorKind } from '../../core/gateway/provider.ts';
import type { AbortCause } from '../../core/net/call-deadlines.ts';
import { OutboundUrlRefusedError } from '../../core/net/outbound-url-guard.ts';
import { parseRetryAfterMs } from './retry-after.ts';
import { redactText, redactValue } from './redact.ts';

export type { AbortCause };

/** Where a transport failure happened: before response headers, or while reading the body. */
export type CallPhase = 'before_headers' | 'body';

export interface ErrorContext {
  /** Provider instance name, so logs say which upstream failed. */
  label: string;
  secrets: readonly string[];
}

export function kindForStatus(status: number): UpstreamErrorKind {
  if (status === 429) return 'rate_limited';
  if (status === 401 || status === 403) return 'auth';
  if (status >= 500) return 'server';
  if (status >= 400) return 'client';
  return 'protocol';
}

/** The human part of an upstream error body: OpenAI's and Anthropic's `{error:{message}}` and common variants. */
export function upstreamErrorMessage(body: unknown): string | null {
  if (typeof body === 'string') return body.trim() === '' ? null : body.slice(0, 500);
  if (body === null || typeof body !== 'object') return null;
  const record = body as Record<string, unknown>;
  const error = record['error'];
  if (typeof error === 'string') return error;
  if (error !== null && typeof error === 'object') {
    const message = (error as Record<string, unknown>)['message'];
    if (typeof message === 'string') return message;
  }
  if (typeof record['message'] === 'string') return record['message'];
  if (typeof record['detail'] === 'string') return record['detail'];
  return null;
}

export function errorFromStatus(context: ErrorContext, status: number, headers: IncomingHttpHeaders, bodyText: string): UpstreamError {
  let body: unknown = bodyText;
  try {
    body = bodyText === '' ? null : JSON.parse(bodyText);
  } catch {
    // a non-JSON error page is still worth keeping for logs, as text
  }
  const safeBody = redactValue(body, context.secrets);
  const detail = upstreamErrorMessage(safeBody);
  const message = redactText(`${context.label}: upstream answered ${status}${detail ? `: ${detail}` : ''}`, context.secrets);
  return new UpstreamError(kindForStatus(status), message, {
    status,
    retryAfterMs: parseRetryAfterMs(headers),
    upstreamBody: safeBody,
  });
}

/** An in-band error (an SSE `error` frame, a JSON `{error}` in a 200 stream). */
export function errorFromInBand(context: ErrorContext, kind: UpstreamErrorKind, body: unknown, status: number | null = null): UpstreamError {
  const safeBody = redactValue(body, context.secrets);
  const detail = upstreamErrorMessage(safeBody) ?? 'unknown error';
  return new UpstreamError(kind, redactText(`${context.label}: upstream reported an error mid-stream: ${detail}`, context.secrets), {
    status,
    upstreamBody: safeBody,
  });
}

export function protocolError(context: ErrorContext, what: string, upstreamBody?: unknown): UpstreamError {
  return new UpstreamError('protocol', redactText(`${context.label}: ${what}`, context.secrets), {
    upstreamBody: upstreamBody === undefined ? undefined : redactValue(upstreamBody, context.secrets),
  });
}

const TIMEOUT_CODES = new Set(['UND_ERR_CONNECT_TIMEOUT', 'UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT', 'ETIMEDOUT']);

function errorCode(error: unknown): string | undefined {
  if (error === null || typeof error !== 'object') return undefined;
  const code = (error as { code?: unknown }).code;
  return typeof code === 'string' ? code : undefined;
}

/**
 * Maps a thrown transport error to the one error type providers throw. Our own aborts are judged
 * by their recorded cause, not by whatever error undici surfaced for them.
 */
export function errorFromTransport(context: ErrorContext, error: unknown, phase: CallPhase, cause: AbortCause | null, timeouts: { firstByteMs: number; totalMs: number }): UpstreamError {
  if (error instanceof UpstreamError) return error;
  const say = (kind: UpstreamErrorKind, what: string) => new UpstreamError(kind, redactText(`${context.label}: ${what}`, context.secrets), { cause: error });

  if (cause === 'caller') return say('aborted', 'the call was cancelled by the gateway');
  if (cause === 'first_byte') return say('timeout', `no response headers within ${timeouts.firstByteMs} ms`);
  if (cause === 'total') return say('timeout', `the call did not finish within ${timeouts.totalMs} ms`);

  if (error instanceof OutboundUrlRefusedError) return say('connect', error.message);
  const code = errorCode(error);
  const reason = error instanceof Error ? error.message : String(error);
  if (code === 'UND_ERR_CONNECT_TIMEOUT') return say('timeout', `connect timed out (${reason})`);
  if (code !== undefined && TIMEOUT_CODES.has(code)) return say('timeout', `timed out (${reason})`);
  // undici's parser error carries an HPE_ code only for some failures: an answer that is no HTTP at all has none.
  if (error instanceof errors.HTTPParserError || code?.startsWith('HPE_')) return say('protocol', `unreadable HTTP response (${reason})`);
  if (phase === 'before_headers') return say('connect', `could not reach the upstream (${code ?? reason})`);
  return say('server', `the connection failed mid-response (${code ?? reason})`);
}

/**
 * The kind for an error `type`/`code` reported in a body rather than a status (stream error
 * frames). OpenAI and Anthropic share most names; anything unknown is the upstream's fault.
 */
export function kindForErrorType(type: unknown): UpstreamErrorKind {
  switch (type) {
    case 'rate_limit_error':
    case 'rate_limit_exceeded':
    case 'tokens':
    case 'requests':
      return 'rate_limited';
    case 'invalid_request_error':
    case 'not_found_error':
    case 'request_too_large':
    case 'context_length_exceeded':
    case 'invalid_prompt': // a Responses API `response.failed` for a prompt the model refuses to take
      return 'client';
    case 'authentication_error':
    case 'permission_error':
    case 'invalid_api_key':
      return 'auth';
    default:
      return 'server';
  }
}

/** Anything a stream loop caught, as the one error type providers throw. */
export function toUpstreamError(context: ErrorContext, error: unknown): UpstreamError {
  if (error instanceof UpstreamError) return error;
  const reason = error instanceof Error ? error.message : String(error);
  return new UpstreamError('protocol', redactText(`${context.label}: unreadable stream (${reason})`, context.secrets), { cause: error });
}
