import type { Authorization, RouteResourceDeclaration } from '../identity/authorization.ts';
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
  /**
   * What a raw route acts on, declared as an operation's `resource` is (core/identity/authorization.ts):
   * the kernel resolves it with `authorizeResources` once the body is parsed, before the handler
   * (core/http/route-resources.ts), and puts the result on `request.authorization`; the handler reads
   * the record with `authorizedRecord(request.authorization!, kind)`. A record the caller may not
   * reach answers its kind's 404, exactly as for operations. The id is read from the raw path,
   * query or parsed JSON body (not from a multipart body, which is still unread then); a `project`
   * or `key` id that is not a UUID answers 400 `invalid_parameter`, a record kind's `find` answers
   * null for an id not of its shape.
   */
  resource?: RouteResourceDeclaration | readonly RouteResourceDeclaration[];
  /** An app's own key may call it on its own app without the scope (core/operations/operations.ts `ownAppKey`). */
  ownAppKey?: true;
}

declare module 'fastify' {
  interface FastifyContextConfig {
    auth?: false | RouteAuth;
    /**
     * Which surface the route belongs to, for the error handler and logs; `v1` routes take API keys
     * only, are listed by `GET /v1` and carry the rate-limit headers (core/http/v1-surface.ts).
     */
    surface?: 'v1' | 'client' | 'mcp' | 'root';
  }
  interface FastifyRequest {
    credential: Credential | null;
    /** The resources the route declared in `config.auth.resource`, resolved and checked; null when it declares none. */
    authorization: Authorization | null;
  }
}
