import type { GatewayCallAnswer, GatewayCalls } from '../../core/gateway/gateway-calls.ts';
import type { Credential } from '../../core/identity/credential.ts';
import type { ErrorCode } from '../../core/kernel/error-catalogue.ts';
import { ApiError } from '../../core/kernel/errors.ts';
import { newRequestId } from '../../core/kernel/request-ids.ts';
// The gateway's codes the assistant answers with as its own (they are catalogued there).
import '../inference/inference-errors.ts';
import '../metering/metering-errors.ts';
import './support-errors.ts';

/**
 * The gateway's refusals the assistant passes on unchanged: the caller's model, money, limits and
 * guardrails decide an assistant call exactly as they decide a /v1 call. Anything else the gateway
 * answers is `assistant_model_failed`.
 */
export const PASSED_THROUGH = [
  'invalid_parameter',
  'model_not_found',
  'unsupported_model',
  'upstream_rejected_request',
  'insufficient_credit',
  'budget_exceeded',
  'guardrail_blocked',
  'rate_limit_exceeded',
  'upstream_error',
  'metering_unavailable',
] as const satisfies readonly ErrorCode[];

/**
 * One gateway call for the caller, billed and logged like a /v1 call; a refusal is thrown as the
 * caller's error. `failure` is the code for any other answer (another plugin's own: the apps
 * plugin's autofix calls the gateway through here too).
 */
export async function callGateway(
  gateway: GatewayCalls,
  credential: Credential,
  endpoint: string,
  body: Record<string, unknown>,
  fields: readonly string[],
  failure: ErrorCode = 'assistant_model_failed',
): Promise<{ requestId: string; body: Record<string, unknown> }> {
  const requestId = newRequestId();
  const answer = await gateway.run(credential, { endpoint, body, requestId });
  if (answer.status !== 200) throw refusalOf(answer, fields, failure);
  if (typeof answer.body !== 'object' || answer.body === null) throw new ApiError(failure);
  return { requestId, body: answer.body as Record<string, unknown> };
}

/** The gateway's error answer as the caller's: its code when passed through (its param only if it names one of our fields). */
function refusalOf(answer: GatewayCallAnswer, fields: readonly string[], failure: ErrorCode): ApiError {
  const error = (answer.body as { error?: { code?: unknown; message?: unknown; param?: unknown } } | null)?.error;
  const code = typeof error?.code === 'string' ? error.code : '';
  if (!(PASSED_THROUGH as readonly string[]).includes(code)) return new ApiError(failure);
  const param = typeof error?.param === 'string' && fields.includes(error.param) ? error.param : null;
  const retryAfter = answer.headers['retry-after'];
  return new ApiError(code as (typeof PASSED_THROUGH)[number], typeof error?.message === 'string' ? error.message : undefined, {
    param,
    ...(retryAfter ? { headers: { 'retry-after': retryAfter } } : {}),
  });
}
