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
export async function guardInput<M extends Modality, B>(
  guards: readonly InputGuard[],
  capability: GatewayCapability<M, B>,
  body: B,
  model: CatalogueModel,
  exchange: CallExchange,
  admission: InferenceAdmission,
): Promise<B> {
  const checks: InputGuardCheck[] = [];
  for (const guard of guards) {
    const found = guard.forCall(exchange.credential);
    const check = found instanceof Promise ? await found : found;
    if (check) checks.push(check);
  }
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
