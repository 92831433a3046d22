import { formBodyOf } from '../../core/http/form-body.ts';
import { OAuthError } from './oauth-rules.ts';

/**
 * The fields of a form body (core/http/form-body.ts parses it). A parameter sent twice is
 * invalid_request (RFC 6749 3.2); a body that is not a form (JSON, nothing) reads as an empty form,
 * so the missing parameters are named.
 */
export function formOf(body: unknown): Record<string, string | undefined> {
  const form = formBodyOf(body);
  if (form === null) return {};
  if (form.repeated !== null) throw new OAuthError('invalid_request', `${form.repeated} is sent more than once`);
  return form.fields;
}
