import { type CodesOf, defineErrorCodes } from '../../core/kernel/error-catalogue.ts';

/** The support plugin's error codes (core/kernel/error-catalogue.ts). */
export const SUPPORT_ERRORS = defineErrorCodes('support', {
  support_request_not_found: { status: 404, type: 'not_found_error', message: 'No such support request, or none you can see' },
  support_attachment_not_found: { status: 404, type: 'not_found_error', message: 'No such attachment, or none you can see' },
  assistant_model_failed: {
    status: 502,
    type: 'upstream_error',
    message: "The assistant's model did not answer in a form the assistant can read; it is safe to retry",
  },
});

declare module '../../core/kernel/error-catalogue.ts' {
  interface ErrorCodes extends CodesOf<typeof SUPPORT_ERRORS> {}
}
