import { resourcesOf, roleRefusalCode, sessionRolesOf } from '../identity/authorization.ts';
import { errorEntry, wireCode, type ErrorCode } from '../kernel/error-catalogue.ts';
import type { AnyOperation } from './operations.ts';

/**
 * What an operation can answer besides success: the codes its handler declares
 * (OperationDefinition.errors) and the ones the kernel implies from the rest of its declaration.
 * The OpenAPI document lists these per operation; with the check on (OperationRegistry's
 * checkDeclaredErrors, which the test helpers turn on), an ApiError escaping an operation with a
 * code outside this list fails loudly, so the list cannot drift from the code.
 */

/** Refusals of the credential itself, before any operation runs (core/http/auth-hook.ts, csrf.ts). */
const AUTHENTICATION: readonly ErrorCode[] = [
  'missing_api_key',
  'invalid_api_key',
  'key_revoked',
  'key_disabled',
  'key_expired',
  'account_suspended',
  'invalid_session',
  'session_revoked',
  'session_expired',
  'no_organization',
  'duplicate_authorization_header',
];

/** What reading a JSON body can fail with before validation (core/http/error-handler.ts, json-body-parser.ts). */
const BODY_PARSING: readonly ErrorCode[] = ['invalid_json', 'request_too_large', 'unsupported_media_type'];

const READ_ONLY_METHODS = new Set(['GET']);

/** The codes the kernel may answer for this operation, whatever its handler does. */
export function impliedErrors(operation: AnyOperation): ErrorCode[] {
  const codes: ErrorCode[] = [...AUTHENTICATION];
  // A session cookie's writes must carry the CSRF token.
  if (!READ_ONLY_METHODS.has(operation.method)) codes.push('csrf_failed');
  if (operation.scope !== null) codes.push('missing_scope');
  const roles = sessionRolesOf(operation);
  if (roles) codes.push(roleRefusalCode(roles));
  if (operation.personOnly) codes.push('person_required');
  if (operation.params || operation.query || operation.body) codes.push('invalid_request', 'invalid_parameter', 'unknown_field');
  if (operation.body) {
    codes.push(...BODY_PARSING, 'invalid_body');
    if (operation.bodyRequired ?? true) codes.push('missing_body');
  } else {
    codes.push('unexpected_body');
  }
  for (const resource of resourcesOf(operation)) {
    codes.push(typeof resource.kind === 'object' ? resource.kind.notFound : resource.kind === 'key' ? 'key_not_found' : 'project_not_found');
    if (resource.access === 'write') codes.push('project_role_insufficient');
    if (resource.whenAbsent === 'default-project') codes.push('project_required');
    if (typeof resource.keyOwnProjectOnly === 'object') codes.push(resource.keyOwnProjectOnly.code);
  }
  return codes;
}

/** Declared and implied codes, each once. */
export function permittedErrors(operation: AnyOperation): ReadonlySet<ErrorCode> {
  return new Set([...impliedErrors(operation), ...(operation.errors ?? [])]);
}

export interface OperationError {
  status: number;
  code: string;
  type: string;
  message: string;
}

/** Every error answer of an operation, by status then code: what the OpenAPI builder documents. */
export function operationErrors(operation: AnyOperation): OperationError[] {
  return [...permittedErrors(operation)]
    .map((code) => {
      const { status, type, message } = errorEntry(code);
      return { status, code: wireCode(code), type, message };
    })
    .sort((a, b) => a.status - b.status || a.code.localeCompare(b.code));
}

/** Thrown in place of an ApiError whose code the operation neither declares nor implies. */
export class UndeclaredErrorCode extends Error {
  constructor(operation: AnyOperation, code: ErrorCode, cause: unknown) {
    super(`Operation ${operation.name} answered '${code}', which it does not declare: add it to the operation's errors (see core/operations/operation-errors.ts)`, { cause });
    this.name = 'UndeclaredErrorCode';
  }
}
