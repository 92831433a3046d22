import type { Credential } from '../identity/credential.ts';
import type { Scope } from '../identity/scopes.ts';

/**
 * Route-level settings the kernel's hooks read from `config`. Every route is authenticated unless
 * it says `auth: false`; `scope: null` means any valid credential.
 */
export interface RouteAuth {
  scope: Scope | null;
  /** Also take the key from `x-api-key`, as Anthropic's SDKs send it (routes that speak Anthropic's API). */
  xApiKey?: boolean;
}

declare module 'fastify' {
  interface FastifyContextConfig {
    auth?: false | RouteAuth;
    /** Which surface the route belongs to, for the error handler and logs; `v1` routes take API keys only. */
    surface?: 'v1' | 'client' | 'mcp' | 'root';
  }
  interface FastifyRequest {
    credential: Credential | null;
  }
}
