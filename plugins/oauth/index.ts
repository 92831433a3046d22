import { z } from 'zod';
import { ConnectorTokensPoint } from '../../core/identity/connector-tokens.ts';
import { McpEndpointPoint, operationToolsEndpoint } from '../../core/http/mcp-endpoint.ts';
import { definePeriodic } from '../../core/jobs/queue-definitions.ts';
import { definePlugin } from '../../core/kernel/plugin.ts';
import { OrganizationErasersPoint } from '../../core/kernel/organization-erasure.ts';
import { Tokens } from '../../core/kernel/di-tokens.ts';
import { SurfacesPoint } from '../../core/kernel/surfaces.ts';
import { connectionOperations } from './connection-operations.ts';
import { mountConsentRoutes } from './consent-routes.ts';
import { installFormBodyParser } from '../../core/http/form-body.ts';
import { oauthMigrations } from './oauth-migrations.ts';
import { mountOAuthRoutes } from './oauth-routes.ts';
import { OAuthServer } from './oauth-server.ts';
import { OAuthStore } from './oauth-store.ts';

const configSchema = z.strictObject({
  /**
   * Where connectors sign in: another host name served by this same process (routes match the
   * Host header's name, any port). An origin, no path. Its host must differ from the API's.
   */
  authUrl: z
    .url()
    .default('http://auth.localhost:8080')
    .transform((value) => new URL(value))
    .refine((url) => url.pathname === '/' && !url.search && !url.hash, 'authUrl is an origin: no path, query or fragment')
    .transform((url) => url.origin),
  accessTokenTtlSeconds: z.number().int().min(60).max(3600).default(600),
  refreshTokenTtlDays: z.number().int().min(1).max(365).default(30),
  codeTtlSeconds: z.number().int().min(10).max(600).default(120),
});

/** Matches a Host header naming auth_url's host, with any port (or none). */
function hostPattern(authUrl: string): RegExp {
  const name = new URL(authUrl).hostname.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  return new RegExp(`^${name}(:\\d+)?$`, 'i');
}

/**
 * OAuth 2.1 for connectors that sign in (Claude, ChatGPT, …): the authorization server of
 * `{auth_url}/mcp` on its own host name. Issues the kernel's third credential kind, a person
 * confined to one project with the scopes granted (core/identity/credential.ts).
 */
export const oauthPlugin = definePlugin({
  name: 'oauth',
  description: 'OAuth 2.1 authorization server for MCP connectors at auth_url: registration, consent, tokens, revocation',
  configSchema,
  migrations: oauthMigrations,
  register({ config, container, extensions }) {
    const store = new OAuthStore(container.resolve(Tokens.Database));
    extensions.provide(ConnectorTokensPoint, store);
    extensions.contribute(OrganizationErasersPoint, { name: 'connector grants', erase: (tx, organizationId) => store.eraseOrganization(tx, organizationId) });
    extensions.contribute(SurfacesPoint, { name: 'connectorMcp', url: `${config.authUrl}/mcp` });
  },
  operations: ({ container }) =>
    connectionOperations({
      store: new OAuthStore(container.resolve(Tokens.Database)),
      authenticator: container.resolve(Tokens.Authenticator),
      clock: container.resolve(Tokens.Clock),
    }),
  periodic: ({ container }) => {
    const store = new OAuthStore(container.resolve(Tokens.Database));
    const clock = container.resolve(Tokens.Clock);
    return [definePeriodic({ name: 'oauth.prune', everyMs: 3_600_000, run: () => store.pruneExpired(clock()) })];
  },
  routes(scope, { config, container, extensions, appConfig }) {
    const authenticator = container.resolve(Tokens.Authenticator);
    const server = new OAuthServer({ store: new OAuthStore(container.resolve(Tokens.Database)), authenticator, clock: container.resolve(Tokens.Clock), settings: config });
    const host = hostPattern(config.authUrl);
    installFormBodyParser(scope);
    mountOAuthRoutes(scope, {
      server,
      authenticator,
      authUrl: config.authUrl,
      host,
      mcp: extensions.get(McpEndpointPoint) ?? operationToolsEndpoint(container.resolve(Tokens.OperationTools)),
      bodyLimit: appConfig.server.bodyLimitBytes,
    });
    mountConsentRoutes(scope, {
      server,
      authenticator,
      signIn: container.resolve(Tokens.SignIn),
      identity: container.resolve(Tokens.Identity),
      host,
      authUrl: config.authUrl,
      secureCookies: config.authUrl.startsWith('https:'),
      sessionTtlDays: appConfig.auth.sessionTtlDays,
    });
  },
});
