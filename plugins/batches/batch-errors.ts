import { type CodesOf, defineErrorCodes } from '../../core/kernel/error-catalogue.ts';

/** The batches plugin's error codes (core/kernel/error-catalogue.ts). */
export const BATCH_ERRORS = defineErrorCodes('batches', {
  batch_not_found: { status: 404, type: 'not_found_error', message: 'No such batch' },
  batch_not_finished: {
    status: 404,
    type: 'not_found_error',
    message: 'The batch has no output yet: its content exists once it is completed, cancelled or expired',
  },
  batch_not_cancellable: { status: 409, type: 'conflict_error', message: 'The batch has ended; only a batch still running can be cancelled' },
  batch_input_invalid: { status: 400, type: 'invalid_request_error', message: 'The batch input file cannot be run as it is' },
  model_not_batchable: {
    status: 400,
    type: 'invalid_request_error',
    message: 'This model does not accept batches (svc_batch is false in GET /v1/models)',
  },
});

declare module '../../core/kernel/error-catalogue.ts' {
  interface ErrorCodes extends CodesOf<typeof BATCH_ERRORS> {}
}
