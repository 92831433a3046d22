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

export class ApiError extends Error {
  readonly status: number;
  readonly type: ErrorType;
  readonly code: string;
  readonly param: string | null;
  /** Extra response headers, e.g. retry-after on 429. */
  readonly headers: Record<string, string>;

  constructor(status: number, code: string, message: string, options: { type?: ErrorType; param?: string | null; headers?: Record<string, string>; cause?: unknown } = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'ApiError';
    this.status = status;
    this.code = code;
    this.type = options.type ?? defaultTypeFor(status);
    this.param = options.param ?? null;
    this.headers = options.headers ?? {};
  }

  toEnvelope(): ErrorEnvelope {
    return { error: { message: this.message, type: this.type, code: this.code, param: this.param } };
  }
}

export function defaultTypeFor(status: number): ErrorType {
  switch (status) {
    case 400:
    case 405:
    case 413:
    case 415:
      return 'invalid_request_error';
    case 401:
      return 'authentication_error';
    case 402:
      return 'insufficient_quota';
    case 403:
      return 'permission_error';
    case 404:
      return 'not_found_error';
    case 409:
      return 'conflict_error';
    case 422:
      return 'guardrail_error';
    case 429:
      return 'rate_limit_error';
    case 502:
    case 503:
    case 504:
      return 'upstream_error';
    default:
      return status >= 500 ? 'api_error' : 'invalid_request_error';
  }
}

export const badRequest = (code: string, message: string, param: string | null = null) => new ApiError(400, code, message, { param });
export const unauthorized = (code: string, message: string) => new ApiError(401, code, message);
export const forbidden = (code: string, message: string) => new ApiError(403, code, message);
export const notFound = (code: string, message: string, param: string | null = null) => new ApiError(404, code, message, { param });
export const conflict = (code: string, message: string) => new ApiError(409, code, message);

/** "10 MB", "64 KB", "1500 bytes": a limit as an operator would have written it. */
export function describeBytes(bytes: number): string {
  if (bytes >= 1024 * 1024 && bytes % (1024 * 1024) === 0) return `${bytes / (1024 * 1024)} MB`;
  if (bytes >= 1024 && bytes % 1024 === 0) return `${bytes / 1024} KB`;
  return `${bytes} bytes`;
}

/** 413 for a body (or one file or field of it, named by `what`) over its limit. */
export const requestTooLarge = (limitBytes: number, what = 'Request body', param: string | null = null) =>
  new ApiError(413, 'request_too_large', `${what} is larger than the ${describeBytes(limitBytes)} limit`, { param });

/** Thrown when the client went away: nothing is sent, everything held is released by the caller. */
export class ClientGoneError extends Error {
  constructor() {
    super('client disconnected');
    this.name = 'ClientGoneError';
  }
}
