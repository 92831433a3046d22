import { randomBytes, timingSafeEqual } from 'node:crypto';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { requestOrigin } from './request-origin.ts';

/**
 * Small server-rendered pages (the OAuth consent page, invitations): HTML built with `html`, which
 * escapes every interpolated value; answered under a CSP that allows no script and no inline
 * style at all, so an escaping mistake cannot run code; forms carry a CSRF token.
 */
export class Html {
  constructor(readonly markup: string) {}
  toString(): string {
    return this.markup;
  }
}

const ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

export function escapeHtml(value: string): string {
  return value.replace(/[&<>"']/g, (c) => ESCAPES[c]!);
}

type Interpolated = Html | string | number | null | undefined | readonly Interpolated[];

function render(value: Interpolated): string {
  if (value === null || value === undefined) return '';
  if (value instanceof Html) return value.markup;
  if (Array.isArray(value)) return value.map(render).join('');
  return escapeHtml(String(value));
}

/** A tagged template: strings are escaped, Html and arrays of Html are kept as they are. */
export function html(strings: TemplateStringsArray, ...values: Interpolated[]): Html {
  let out = strings[0]!;
  for (let i = 0; i < values.length; i++) out += render(values[i]!) + strings[i + 1]!;
  return new Html(out);
}

export interface PageOptions {
  title: string;
  body: Html;
  status?: number;
  /**
   * Origins a form on the page may end up at besides this one: browsers apply `form-action` to the
   * redirect that follows a submission too (the consent page's approval redirects to the client).
   */
  formTargets?: readonly string[];
}

/** Answers a whole page: no caching, no framing, no referrer to other sites, no script. */
export function sendPage(reply: FastifyReply, options: PageOptions): FastifyReply {
  const formAction = ["'self'", ...(options.formTargets ?? [])].join(' ');
  return (
    reply
      .code(options.status ?? 200)
      .header('content-type', 'text/html; charset=utf-8')
      .header('content-security-policy', `default-src 'none'; form-action ${formAction}; frame-ancestors 'none'; base-uri 'none'`)
      .header('x-frame-options', 'DENY')
      .header('x-content-type-options', 'nosniff')
      // Not no-referrer: browsers then send `Origin: null` with the page's own forms, and the CSRF check needs their origin.
      .header('referrer-policy', 'same-origin')
      .header('cache-control', 'no-store')
      .send(
        `<!doctype html>\n<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width">${html`<title>${options.title}</title>`}</head>\n<body>${options.body.markup}</body></html>\n`,
      )
  );
}

const FORM_CSRF_COOKIE = 'svc_form_csrf';
export const FORM_CSRF_FIELD = 'csrf_token';

/**
 * The double-submit form token: a random value in a SameSite=Strict, HttpOnly cookie of this host and
 * in a hidden field of each form; a POST must carry both, equal. Works before anyone signs in (a
 * sign-in form needs it too). Returns the value to put in the form, reusing the browser's cookie.
 */
export function formCsrfToken(request: FastifyRequest, reply: FastifyReply, secure: boolean): string {
  const existing = cookieValue(request.headers.cookie, FORM_CSRF_COOKIE);
  if (existing && /^[A-Za-z0-9_-]{43}$/.test(existing)) return existing;
  const token = randomBytes(32).toString('base64url');
  void reply.header('set-cookie', [`${FORM_CSRF_COOKIE}=${token}`, 'Path=/', 'HttpOnly', 'SameSite=Strict', ...(secure ? ['Secure'] : [])].join('; '));
  return token;
}

/**
 * Whether a form POST passes: the field equals the cookie, and the browser does not say the
 * submission came from another site or origin. `ownOrigin` is the pages' public origin (behind a
 * proxy that terminates TLS the request itself looks like http); null means this request's own.
 */
export function formCsrfPasses(request: FastifyRequest, field: unknown, ownOrigin: string | null): boolean {
  const origin = request.headers.origin;
  if (origin !== undefined && origin !== requestOrigin(request, ownOrigin)) return false;
  if (request.headers['sec-fetch-site'] === 'cross-site') return false;
  const cookie = cookieValue(request.headers.cookie, FORM_CSRF_COOKIE);
  if (!cookie || typeof field !== 'string') return false;
  const a = Buffer.from(cookie);
  const b = Buffer.from(field);
  return a.length === b.length && timingSafeEqual(a, b);
}

function cookieValue(header: string | undefined, name: string): string | null {
  if (!header) return null;
  for (const part of header.split(';')) {
    const eq = part.indexOf('=');
    if (eq > 0 && part.slice(0, eq).trim() === name) return part.slice(eq + 1).trim();
  }
  return null;
}
