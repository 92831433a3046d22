import type { FastifyInstance } from 'fastify';

/** Forms are small (a token, a password, a few fields); anything larger is not one of ours. */
const FORM_BODY_LIMIT = 16 * 1024;

/** An `application/x-www-form-urlencoded` body, parsed: its fields, and the first one sent more than once. */
export class FormBody {
  constructor(
    readonly fields: Record<string, string>,
    /** Refused by each route in its own terms (RFC 6749 3.2 for OAuth's, a refused form for a page's). */
    readonly repeated: string | null,
  ) {}
}

/**
 * Parses form bodies in `scope` (an encapsulated plugin context): OAuth's token and revocation
 * requests, the forms of the server-rendered pages (core/http/pages.ts). JSON stays the kernel's.
 */
export function installFormBodyParser(scope: FastifyInstance): void {
  scope.addContentTypeParser('application/x-www-form-urlencoded', { parseAs: 'string', bodyLimit: FORM_BODY_LIMIT }, (_request, body, done) => {
    const fields: Record<string, string> = {};
    let repeated: string | null = null;
    for (const [name, value] of new URLSearchParams(body as string)) {
      if (Object.hasOwn(fields, name)) repeated ??= name;
      fields[name] = value;
    }
    done(null, new FormBody(fields, repeated));
  });
}

/** The parsed form, or null when the body is not a form (JSON, nothing). */
export function formBodyOf(body: unknown): FormBody | null {
  return body instanceof FormBody ? body : null;
}
