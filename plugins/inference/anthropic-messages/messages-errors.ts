import type { ApiError } from '../../../core/kernel/errors.ts';

/** The error types Anthropic's API answers with (its `error.type`), which its SDKs read. */
export type AnthropicErrorType =
  | 'invalid_request_error'
  | 'authentication_error'
  | 'billing_error'
  | 'permission_error'
  | 'not_found_error'
  | 'request_too_large'
  | 'rate_limit_error'
  | 'api_error'
  | 'timeout_error'
  | 'overloaded_error';

export interface AnthropicErrorBody {
  type: 'error';
  error: { type: AnthropicErrorType; message: string };
}

/**
 * The Anthropic error type for a gateway status. The status itself is kept (a 503 stays 503, not
 * Anthropic's 529): metrics, logs and the gateway's other routes agree on it, and Anthropic's SDKs
 * retry 503 as they retry 529. 402 (credit exhausted) is Anthropic's own billing_error.
 */
export function anthropicErrorType(status: number): AnthropicErrorType {
  switch (status) {
    case 401:
      return 'authentication_error';
    case 402:
      return 'billing_error';
    case 403:
      return 'permission_error';
    case 404:
      return 'not_found_error';
    case 413:
      return 'request_too_large';
    case 429:
      return 'rate_limit_error';
    case 503:
    case 529:
      return 'overloaded_error';
    case 504:
      return 'timeout_error';
    default:
      return status >= 500 ? 'api_error' : 'invalid_request_error';
  }
}

/** A gateway error in Anthropic's shape. The message is the gateway's (masked for 5xx), which names the field at fault. */
export function anthropicErrorBody(error: ApiError): AnthropicErrorBody {
  return { type: 'error', error: { type: anthropicErrorType(error.status), message: error.message } };
}
