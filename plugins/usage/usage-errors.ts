import { type CodesOf, defineErrorCodes } from '../../core/kernel/error-catalogue.ts';

/** The usage plugin's error codes (core/kernel/error-catalogue.ts: what a code is, and why one table). */
export const USAGE_ERRORS = defineErrorCodes('usage', {
  request_not_found: { status: 404, type: 'not_found_error', message: 'No such request' },
});

declare module '../../core/kernel/error-catalogue.ts' {
  interface ErrorCodes extends CodesOf<typeof USAGE_ERRORS> {}
}
