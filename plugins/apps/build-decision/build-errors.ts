import { type CodesOf, defineErrorCodes } from '../../../core/kernel/error-catalogue.ts';
import { ApiError, type ErrorEnvelope } from '../../../core/kernel/errors.ts';

/**
 * The build decision's refusals (core/kernel/error-catalogue.ts: what a code is, and why one table).
 * All are 400: the repository (or the caller's settings for it) cannot be built as it stands, and
 * each is answered before anything is created, with a message that says what to change.
 */
export const BUILD_DECISION_ERRORS = defineErrorCodes('apps', {
  multiple_apps_require_root_dir: {
    status: 400,
    type: 'invalid_request_error',
    message: 'The repository holds several apps and none at its top; choose one with rootDir',
  },
  nothing_buildable: { status: 400, type: 'invalid_request_error', message: 'Nothing in this folder is an app this service can build' },
  root_dir_not_found: { status: 400, type: 'invalid_request_error', message: 'rootDir names no folder of the repository' },
  multiple_lockfiles: {
    status: 400,
    type: 'invalid_request_error',
    message: 'The app commits lockfiles of several package managers; keep the one you use',
  },
  runtime_unavailable: { status: 400, type: 'invalid_request_error', message: 'The runtime this app needs is not available on this service' },
  no_start_command: { status: 400, type: 'invalid_request_error', message: 'How to start this app could not be determined; give startCommand' },
  unfinished_start_command: { status: 400, type: 'invalid_request_error', message: 'startCommand is not a complete command' },
});

declare module '../../../core/kernel/error-catalogue.ts' {
  interface ErrorCodes extends CodesOf<typeof BUILD_DECISION_ERRORS> {}
}

export type BuildErrorCode = keyof typeof BUILD_DECISION_ERRORS;

/** What a refusal carries beyond the envelope's four fields (which it cannot replace): the folders to choose from, the files seen. */
export type BuildErrorDetails = Readonly<Record<string, unknown>> & { readonly [K in 'message' | 'type' | 'code' | 'param']?: never };

/**
 * An ApiError whose envelope also carries `details` beside `code` and `param` (`candidates`,
 * `supported`, `topLevelFiles`, `lockfiles`, `runtime`), so a client can offer the choices without
 * parsing the message.
 */
export class BuildDecisionError extends ApiError {
  constructor(
    code: BuildErrorCode | 'invalid_parameter',
    message: string,
    param: string | null,
    readonly details: BuildErrorDetails = {},
  ) {
    super(code, message, { param });
  }

  override toEnvelope(): ErrorEnvelope {
    const envelope = super.toEnvelope();
    return { error: { ...envelope.error, ...this.details } };
  }
}
