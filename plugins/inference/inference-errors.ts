import { type CodesOf, defineErrorCodes } from '../../core/kernel/error-catalogue.ts';

/** The inference plugin's error codes (core/kernel/error-catalogue.ts: what a code is, and why one table). */
export const INFERENCE_ERRORS = defineErrorCodes('inference', {
  model_not_found: { status: 404, type: 'not_found_error', message: 'The model does not exist or this key cannot use it; GET /v1/models lists the ones it can' },
  browser_access_denied: {
    status: 403,
    type: 'permission_error',
    message:
      'Requests from a browser (with an Origin header) are refused: they would expose your API key. Call from a server, or send x-svc-dangerous-browser-access: true if you accept the risk.',
  },
  upstream_error: { status: 502, type: 'upstream_error', message: 'The model could not be reached; it is safe to retry' },
  guardrail_blocked: {
    status: 422,
    type: 'invalid_request_error',
    message: "The account's data guardrails blocked this request; nothing was sent to the model and nothing was charged",
  },
  unsupported_model: { status: 400, type: 'invalid_request_error', message: 'This model does not serve this endpoint; GET /v1/models says what each model does' },
  unsupported_tool: { status: 400, type: 'invalid_request_error', message: 'A tool in the request cannot run through the gateway on this model' },
  upstream_rejected_request: { status: 400, type: 'invalid_request_error', message: 'The model rejected the request' },
});

declare module '../../core/kernel/error-catalogue.ts' {
  interface ErrorCodes extends CodesOf<typeof INFERENCE_ERRORS> {}
}
