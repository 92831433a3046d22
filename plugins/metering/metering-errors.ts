import { type CodesOf, defineErrorCodes } from '../../core/kernel/error-catalogue.ts';

/** The metering plugin's error codes (core/kernel/error-catalogue.ts: what a code is, and why one table). */
export const METERING_ERRORS = defineErrorCodes('metering', {
  rate_limit_exceeded: { status: 429, type: 'rate_limit_error', message: 'Too many requests for this key, project or account; retry after the time in retry-after' },
  insufficient_credit: {
    status: 402,
    type: 'insufficient_quota',
    message: 'The account’s credit balance is used up; top up to continue (GET /client/credits shows the balance)',
  },
  budget_exceeded: { status: 402, type: 'insufficient_quota', message: 'A spend cap is used up. GET /client/budget shows every cap.' },
  metering_unavailable: { status: 503, type: 'upstream_error', message: 'Spend counters could not be prepared; it is safe to retry' },
  unit_not_priced: {
    status: 400,
    type: 'invalid_request_error',
    message: 'The model has no price for what this request asks for (an image size or quality, web searches, characters or audio)',
  },
  spend_hold_exists: { status: 409, type: 'conflict_error', message: 'A spend hold with this reference exists already' },
  model_not_priced: { status: 500, type: 'api_error', message: 'The model has no prices; refusing to serve it unmetered' },
  promotion_code_not_found: { status: 404, type: 'not_found_error', message: 'No such promotion code (check it, or it may have been withdrawn)' },
  promotion_code_expired: { status: 400, type: 'invalid_request_error', message: 'This promotion code has expired' },
  promotion_code_already_redeemed: { status: 409, type: 'conflict_error', message: 'This organisation has already redeemed this promotion code' },
  promotion_code_used_up: { status: 409, type: 'conflict_error', message: 'This promotion code has been redeemed as many times as it allows' },
  too_many_redemption_attempts: {
    status: 429,
    type: 'rate_limit_error',
    message: 'Too many promotion codes tried; wait for the time in retry-after before trying again',
  },
});

declare module '../../core/kernel/error-catalogue.ts' {
  interface ErrorCodes extends CodesOf<typeof METERING_ERRORS> {}
}
