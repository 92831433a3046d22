import type { FastifyInstance } from 'fastify';
import { OAuthError } from './oauth-rules.ts';

/** Forms and tokens are small; anything larger is not an OAuth request. */
const FORM_BODY_LIMIT = 16 * 1024;

class ParsedForm {
  constructor(
    readonly fields: Record<string, string>,
    /** A parameter sent more than once, refused by formOf where the route can answer in OAuth's terms. */
    readonly repeated: string | null,
  ) {}
}

/** `application/x-www-form-urlencoded` bodies: RFC 6749's token and revocation requests, the consent page's forms. */
export function installFormBodyParser(scope: FastifyInstance): void {
  scope.addContentTypeParser('application/x-www-form-urlencoded', { parseAs: 'string', bodyLimit: FORM_BODY_LIMIT }, (_request, body, done) => {
    const fields: Record<string, string> = {};
    let repeated: string | null = null;
    for (const [name, value] of new URLSearchParams(body as string)) {
      if (Object.hasOwn(fields, name)) repeated ??= name;
      fields[name] = value;
    }
    done(null, new ParsedForm(fields, repeated));
  });
}

/**
 * The fields of a form body. A parameter sent twice is invalid_request (RFC 6749 3.2); a body that
 * is not a form (JSON, nothing) reads as an empty form, so the missing parameters are named.
 */
export function formOf(body: unknown): Record<string, string | undefined> {
  if (!(body instanceof ParsedForm)) return {};
  const form = body;
  if (form.repeated !== null) throw new OAuthError('invalid_request', `${form.repeated} is sent more than once`);
  return form.fields;
}
