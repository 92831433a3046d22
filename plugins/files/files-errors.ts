import { type CodesOf, defineErrorCodes } from '../../core/kernel/error-catalogue.ts';

/** The files plugin's error codes (core/kernel/error-catalogue.ts: what a code is, and why one table). */
export const FILE_ERRORS = defineErrorCodes('files', {
  file_not_found: { status: 404, type: 'not_found_error', message: 'No such file' },
  invalid_batch_file: {
    status: 400,
    type: 'invalid_request_error',
    message: 'The batch file is not valid: JSONL, one request per line {custom_id, method: "POST", url, body}',
  },
});

declare module '../../core/kernel/error-catalogue.ts' {
  interface ErrorCodes extends CodesOf<typeof FILE_ERRORS> {}
}
