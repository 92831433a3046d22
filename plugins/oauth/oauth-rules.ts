import { createHash } from 'node:crypto';
import { isManagementScope, SCOPES, type Scope } from '../../core/identity/scopes.ts';

/**
 * What a connector may ask for: every management scope. `inference` is not offered: connectors
 * manage the account through MCP and never call /v1.
 */
export const CONNECTOR_SCOPES: readonly Scope[] = SCOPES.filter(isManagementScope);

/** An RFC 6749 error: its `error` code, a sentence for people, and the HTTP status it answers. */
export class OAuthError extends Error {
  constructor(
    readonly error: string,
    readonly description: string,
    readonly status = 400,
  ) {
    super(description);
  }

  body(): { error: string; error_description: string } {
    return { error: this.error, error_description: this.description };
  }
}

/**
 * Schemes a browser or the operating system treats as something other than an app's callback:
 * never a redirect target (a `javascript:` redirect would run script on our page's behalf).
 */
const NOT_AN_APP_SCHEME = new Set(['javascript:', 'data:', 'vbscript:', 'file:', 'blob:', 'about:', 'ftp:', 'ws:', 'wss:', 'mailto:', 'tel:', 'sms:']);

/**
 * Redirect URIs a client may register: https; plain http to this machine's loopback only; or a
 * native app's private-use scheme (`cursor://…`, `com.example.app:/cb`; RFC 8252 7.1: the code it
 * receives is worthless without the PKCE verifier, which only the app that asked holds); never a
 * fragment. Null when acceptable, else why not.
 */
export function redirectUriRefusal(value: string): string | null {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return `${value} is not an absolute URL`;
  }
  if (url.hash !== '' || value.includes('#')) return `${value} has a fragment`;
  if (url.username || url.password) return `${value} carries credentials`;
  if (url.protocol === 'https:') return null;
  const host = url.hostname.replace(/^\[|\]$/g, '');
  if (url.protocol === 'http:' && (host === '127.0.0.1' || host === '::1' || host === 'localhost')) return null;
  if (url.protocol !== 'http:' && !NOT_AN_APP_SCHEME.has(url.protocol)) return null;
  return `${value} is neither https, http to a loopback address, nor an app's own scheme`;
}

const VERIFIER = /^[A-Za-z0-9._~-]{43,128}$/;
const CHALLENGE = /^[A-Za-z0-9_-]{43}$/;

export function isCodeChallenge(value: string): boolean {
  return CHALLENGE.test(value);
}

/** PKCE S256 (RFC 7636): the verifier's SHA-256, base64url, is the challenge sent to /authorize. */
export function verifierMatches(verifier: string, challenge: string): boolean {
  return VERIFIER.test(verifier) && createHash('sha256').update(verifier).digest('base64url') === challenge;
}

/** The scopes asked for (space-separated), or every connector scope when none is named. */
export function requestedScopes(scope: string | undefined): Scope[] {
  if (scope === undefined || scope.trim() === '') return [...CONNECTOR_SCOPES];
  const asked = [...new Set(scope.trim().split(/\s+/))];
  const unknown = asked.filter((s) => !(CONNECTOR_SCOPES as readonly string[]).includes(s));
  if (unknown.length > 0) throw new OAuthError('invalid_scope', `Unknown scope ${unknown.join(', ')}; this server offers ${CONNECTOR_SCOPES.join(' ')}`);
  return CONNECTOR_SCOPES.filter((s) => asked.includes(s));
}
