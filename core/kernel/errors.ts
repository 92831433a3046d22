import { errorEntry, wireCode, type ErrorCode } from './error-catalogue.ts';

/**
 * The one error type every surface answers with. Handlers throw ApiError; the kernel's error
 * handler turns it (and anything else) into the spec's envelope {error:{message,type,code,param}}.
 */
export type ErrorType =
  | 'invalid_request_error'
  | 'authentication_error'
  | 'permission_error'
  | 'not_found_error'
  | 'conflict_error'
  | 'rate_limit_error'
  | 'insufficient_quota'
  | 'guardrail_error'
  | 'upstream_error'
  | 'api_error';

export interface ErrorEnvelope {
  error: { message: string; type: ErrorType; code: string; param: string | null };
}

export interface ApiErrorOptions {
  /** The input field at fault, as the envelope's `param`. */
  param?: string | null;
  /** Extra response headers, e.g. retry-after on 429. */
  headers?: Record<string, string>;
  cause?: unknown;
}

/**
 * An error answer. The code must be catalogued (core/kernel/error-catalogue.ts), which fixes its status
 * and type; the message defaults to the catalogue's sentence.
 */
export class ApiError extends Error {
  readonly status: number;
  readonly type: ErrorType;
  /** The code on the wire. */
  readonly code: string;
  /** The catalogue entry, which declarations (OperationDefinition.errors) name. */
  readonly catalogued: ErrorCode;
  readonly param: string | null;
  /** Extra response headers, e.g. retry-after on 429. */
  readonly headers: Record<string, string>;

  constructor(code: ErrorCode, message?: string, options: ApiErrorOptions = {}) {
    const entry = errorEntry(code);
    super(message ?? entry.message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'ApiError';
    this.status = entry.status;
    this.type = entry.type;
    this.code = wireCode(code);
    this.catalogued = code;
    this.param = options.param ?? null;
    this.headers = options.headers ?? {};
  }

  toEnvelope(): ErrorEnvelope {
    return { error: { message: this.message, type: this.type, code: this.code, param: this.param } };
  }
}

/** "10 MB", "64 KB", "1500 bytes": a limit as an operator would have written it. */
export function describeBytes(bytes: number): string {
  if (bytes >= 1024 * 1024 && bytes % (1024 * 1024) === 0) return `${bytes / (1024 * 1024)} MB`;
  if (bytes >= 1024 && bytes % 1024 === 0) return `${bytes / 1024} KB`;
  return `${bytes} bytes`;
}

/** 413 for a body (or one file or field of it, named by `what`) over its limit. */
export const requestTooLarge = (limitBytes: number, what = 'Request body', param: string | null = null) =>
  new ApiError('request_too_large', `${what} is larger than the ${describeBytes(limitBytes)} limit`, { param });

/** Thrown when the client went away: nothing is sent, everything held is released by the caller. */
export class ClientGoneError extends Error {
  constructor() {
    super('client disconnected');
    this.name = 'ClientGoneError';
  }
}
