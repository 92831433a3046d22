import type { FastifyInstance, FastifyReply, FastifyRequest, RouteShorthandOptions } from 'fastify';
import type { Authenticator } from '../../core/identity/authenticator.ts';
import { isAllowedOrigin, type McpEndpoint } from '../../core/http/mcp-endpoint.ts';
import { ApiError } from '../../core/kernel/errors.ts';
import { authorizationHeader } from '../../core/http/authorization-header.ts';
import { formOf } from './form-body.ts';
import type { OAuthServer } from './oauth-server.ts';
import { CONNECTOR_SCOPES, OAuthError } from './oauth-rules.ts';

export interface OAuthRouteDeps {
  server: OAuthServer;
  authenticator: Authenticator;
  authUrl: string;
  /** Routes answer only requests whose Host is auth_url's host name. */
  host: RegExp;
  /** Serves `{auth_url}/mcp`: the operation tools, the same as `/mcp` on the API host. */
  mcp: McpEndpoint;
  /** The largest body `{auth_url}/mcp` reads once the token is accepted: the API's (`server.bodyLimitBytes`), as at `/mcp`. */
  bodyLimit: number;
}

export const PROTECTED_RESOURCE_PATH = '/.well-known/oauth-protected-resource';

/**
 * The machine-facing half of the authorization server: metadata (RFC 9728, RFC 8414), dynamic
 * client registration (RFC 7591), the token and revocation endpoints (RFC 6749, RFC 7009), and
 * `{auth_url}/mcp`, which takes connectors' access tokens only. Errors here are RFC 6749 bodies
 * (`{error, error_description}`), not the API's envelope: OAuth clients read those.
 */
export function mountOAuthRoutes(scope: FastifyInstance, deps: OAuthRouteDeps): void {
  const { server, authUrl } = deps;
  const open: RouteShorthandOptions = { constraints: { host: deps.host }, config: { auth: false, surface: 'root' } };

  const resourceMetadata = () => ({
    resource: server.resource,
    authorization_servers: [authUrl],
    scopes_supported: CONNECTOR_SCOPES,
    bearer_methods_supported: ['header'],
    resource_name: 'Management tools (MCP)',
  });
  scope.get(PROTECTED_RESOURCE_PATH, open, async (_request, reply) => json(reply, 200, resourceMetadata()));
  scope.get(`${PROTECTED_RESOURCE_PATH}/mcp`, open, async (_request, reply) => json(reply, 200, resourceMetadata()));

  scope.get('/.well-known/oauth-authorization-server', open, async (_request, reply) =>
    json(reply, 200, {
      issuer: authUrl,
      authorization_endpoint: `${authUrl}/authorize`,
      token_endpoint: `${authUrl}/token`,
      registration_endpoint: `${authUrl}/register`,
      revocation_endpoint: `${authUrl}/revoke`,
      scopes_supported: CONNECTOR_SCOPES,
      response_types_supported: ['code'],
      grant_types_supported: ['authorization_code', 'refresh_token'],
      code_challenge_methods_supported: ['S256'],
      token_endpoint_auth_methods_supported: ['none'],
      revocation_endpoint_auth_methods_supported: ['none'],
      authorization_response_iss_parameter_supported: true,
    }),
  );

  scope.post('/register', open, async (request, reply) => answer(reply, 201, () => server.register(request.body)));
  scope.post('/token', open, async (request, reply) => answer(reply, 200, () => server.token(formOf(request.body))));
  scope.post('/revoke', open, async (request, reply) =>
    answer(reply, 200, async () => {
      await server.revoke(formOf(request.body));
      return {};
    }),
  );

  // Browser-based clients (the MCP Inspector) call these across origins; nothing here reads cookies.
  for (const path of [PROTECTED_RESOURCE_PATH, `${PROTECTED_RESOURCE_PATH}/mcp`, '/.well-known/oauth-authorization-server', '/register', '/token', '/revoke']) {
    scope.options(path, open, async (_request, reply) =>
      reply
        .code(204)
        .header('access-control-allow-origin', '*')
        .header('access-control-allow-methods', 'GET, POST')
        .header('access-control-allow-headers', 'content-type, mcp-protocol-version')
        .header('access-control-max-age', '600')
        .send(),
    );
  }

  mountMcp(scope, deps, deps.mcp, open);
}

/**
 * `{auth_url}/mcp`: a connector's access token for this resource, nothing else. Every 401 carries
 * the challenge that sends an MCP client to the protected-resource metadata (RFC 9728 5.1).
 */
function mountMcp(scope: FastifyInstance, deps: OAuthRouteDeps, mcp: McpEndpoint, open: RouteShorthandOptions): void {
  const metadataUrl = `${deps.authUrl}${PROTECTED_RESOURCE_PATH}/mcp`;
  // Quotes and backslashes would end the quoted string early: descriptions are plain sentences anyway.
  const challenge = (error?: { code: string; description: string }) =>
    `Bearer resource_metadata="${metadataUrl}"${error ? `, error="${error.code}", error_description="${error.description.replace(/["\\]/g, '')}"` : ''}`;
  // Authenticated on arrival, before the body is read: an accepted token may then send a tool call as
  // large as /mcp takes, while a request without one never gets past the headers.
  const authenticate = async (request: FastifyRequest, reply: FastifyReply) => {
    if (!isAllowedOrigin(request, deps.authUrl)) throw new ApiError('origin_not_allowed');
    const authorization = authorizationHeader(request.raw);
    if (authorization === undefined) {
      void reply.header('www-authenticate', challenge());
      throw new ApiError('missing_api_key', 'Sign in: this endpoint takes an OAuth access token from this server');
    }
    let credential: Awaited<ReturnType<Authenticator['authenticate']>>;
    try {
      credential = await deps.authenticator.authenticate(authorization);
    } catch (error) {
      if (error instanceof ApiError && error.status === 401) void reply.header('www-authenticate', challenge({ code: 'invalid_token', description: error.message }));
      throw error;
    }
    if (credential.kind !== 'connector' || credential.audience !== deps.server.resource) {
      const description = credential.kind === 'connector' ? 'This token was issued for another resource' : 'This endpoint takes OAuth access tokens only; API keys use /mcp on the API host';
      void reply.header('www-authenticate', challenge({ code: 'invalid_token', description }));
      throw new ApiError('invalid_api_key', description);
    }
    request.credential = credential;
  };
  scope.route({
    method: ['GET', 'POST', 'DELETE'],
    url: '/mcp',
    ...open,
    config: { auth: false, surface: 'mcp' },
    bodyLimit: deps.bodyLimit,
    onRequest: authenticate,
    handler: (request, reply) => mcp(request, reply, request.credential!),
  });
}

async function answer(reply: FastifyReply, status: number, run: () => Promise<unknown>): Promise<FastifyReply> {
  try {
    return json(reply, status, await run());
  } catch (error) {
    if (error instanceof OAuthError) return json(reply, error.status, error.body());
    throw error;
  }
}

function json(reply: FastifyReply, status: number, body: unknown): FastifyReply {
  return reply.code(status).header('cache-control', 'no-store').header('access-control-allow-origin', '*').send(body);
}
