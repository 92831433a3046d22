import type { InferenceAdmission } from '../../core/gateway/inference-admission.ts';
import type { InputGuard, InputGuardCheck } from '../../core/gateway/input-guards.ts';
import type { Modality } from '../../core/gateway/provider.ts';
import { ApiError } from '../../core/kernel/errors.ts';
import type { GatewayCapability } from './capability.ts';
import type { CallExchange } from './gateway-call.ts';
import type { CatalogueModel } from './model-catalogue.ts';
// Catalogues the codes this module answers with (core/kernel/error-catalogue.ts).
import './inference-errors.ts';

/**
 * Runs a call's input texts through the data guardrails (core/gateway/input-guards.ts), before any
 * upstream call and before admission takes money: returns the body to send (redacted where a
 * check said so), or ends the call with 422 `guardrail_blocked`, logged without its body and
 * billed nothing. When no guard has a check for this caller, no text is read.
 */
export function guardInput<M extends Modality, B>(
  guards: readonly InputGuard[],
  capability: GatewayCapability<M, B>,
  body: B,
  model: CatalogueModel,
  exchange: CallExchange,
  admission: InferenceAdmission,
): B | Promise<B> {
  // The body itself, without a promise, when every guard answers at once (from its cache) with no check.
  const checks: InputGuardCheck[] = [];
  for (let index = 0; index < guards.length; index += 1) {
    const found = guards[index]!.forCall(exchange.credential);
    if (found instanceof Promise) return guardedLater(guards, index, found, checks, capability, body, model, exchange, admission);
    if (found) checks.push(found);
  }
  return applyChecks(checks, capability, body, model, exchange, admission);
}

/** From the first guard that had to look its checks up: the rest in turn, then the checks. */
async function guardedLater<M extends Modality, B>(
  guards: readonly InputGuard[],
  from: number,
  pending: Promise<InputGuardCheck | null>,
  checks: InputGuardCheck[],
  capability: GatewayCapability<M, B>,
  body: B,
  model: CatalogueModel,
  exchange: CallExchange,
  admission: InferenceAdmission,
): Promise<B> {
  const first = await pending;
  if (first) checks.push(first);
  for (const guard of guards.slice(from + 1)) {
    const found = guard.forCall(exchange.credential);
    const check = found instanceof Promise ? await found : found;
    if (check) checks.push(check);
  }
  return applyChecks(checks, capability, body, model, exchange, admission);
}

function applyChecks<M extends Modality, B>(
  checks: readonly InputGuardCheck[],
  capability: GatewayCapability<M, B>,
  body: B,
  model: CatalogueModel,
  exchange: CallExchange,
  admission: InferenceAdmission,
): B {
  if (checks.length === 0) return body;
  let blockedBy: string | null = null;
  const guarded = capability.mapInputTexts(body, (text) => {
    if (blockedBy !== null) return text;
    let current = text;
    for (const check of checks) {
      const decision = check.check(current);
      if (decision.action === 'block') {
        blockedBy = decision.rule;
        return current;
      }
      // Later checks see the redacted text.
      if (decision.action === 'redact') current = decision.text;
    }
    return current;
  });
  if (blockedBy === null) return guarded;
  admission.refused({
    credential: exchange.credential,
    requestId: exchange.requestId,
    endpoint: capability.endpoint,
    model: model.id,
    status: 422,
    errorCode: 'guardrail_blocked',
  });
  throw new ApiError('guardrail_blocked', `The account's data guardrails blocked this request (rule ${JSON.stringify(blockedBy)}); nothing was sent to the model and nothing was charged`);
}
