import { type CodesOf, defineErrorCodes } from '../../core/kernel/error-catalogue.ts';

/** The webhooks plugin's error codes (core/kernel/error-catalogue.ts: what a code is, and why one table). */
export const WEBHOOK_ERRORS = defineErrorCodes('webhooks', {
  webhook_not_found: { status: 404, type: 'not_found_error', message: 'No such webhook endpoint' },
  delivery_not_found: { status: 404, type: 'not_found_error', message: 'No such delivery of this webhook endpoint' },
  webhook_url_invalid: {
    status: 400,
    type: 'invalid_request_error',
    message: 'The endpoint URL must be an absolute https URL without user name or password',
  },
  webhook_url_refused: {
    status: 400,
    type: 'invalid_request_error',
    message: 'The endpoint URL points at a private, loopback or link-local address; webhooks go to public internet addresses only',
  },
  unknown_event_type: {
    status: 400,
    type: 'invalid_request_error',
    message: 'Not a public event type; GET /client/events/types lists them (or use "*" for every type)',
  },
  webhook_limit_reached: { status: 409, type: 'conflict_error', message: 'This organisation has as many webhook endpoints as it may; delete one first' },
  webhook_disabled: { status: 409, type: 'conflict_error', message: 'The webhook endpoint is switched off; enable it first' },
  delivery_pending: { status: 409, type: 'conflict_error', message: 'The delivery is still being attempted; resend it once it has succeeded or failed' },
});

declare module '../../core/kernel/error-catalogue.ts' {
  interface ErrorCodes extends CodesOf<typeof WEBHOOK_ERRORS> {}
}
