import { z } from 'zod';
import type { FastifyInstance } from 'fastify';
import { authorizedRecord } from '../../core/identity/authorization.ts';
import type { Credential } from '../../core/identity/credential.ts';
import { html, sendPage } from '../../core/http/pages.ts';
import { ApiError } from '../../core/kernel/errors.ts';
import { actorOf } from '../../core/operations/operation-events.ts';
import { type AnyOperation, defineOperation } from '../../core/operations/operations.ts';
import { resourceId } from '../../core/vocabulary/ids.ts';
import { oauthConnectionView, oauthDisconnectView, oauthSignInStatusView, oauthStartView } from './tool-gateway-schemas.ts';
import { CALLBACK_PATH, type UpstreamOAuth } from './upstream-oauth.ts';
import type { UpstreamOAuthStore } from './upstream-oauth-store.ts';
import { upstreamRecordKind } from './upstream-operations.ts';
import type { Upstream, UpstreamStore } from './upstream-store.ts';
// Catalogues the codes and event types this module answers with and emits.
import './tool-gateway-errors.ts';
import './tool-gateway-events.ts';

export interface UpstreamOAuthOperationDeps {
  upstreams: UpstreamStore;
  connections: UpstreamOAuthStore;
  oauth: UpstreamOAuth;
  clock: () => Date;
  /** Lists the upstream's tools once a sign-in connected it (errors are its health's business). */
  afterConnect: (upstream: Upstream) => Promise<void>;
}

/** Who started a sign-in: only they learn how it ended. */
const starterOf = (credential: Credential) => {
  const actor = actorOf(credential);
  return `${actor.kind}:${actor.id}`;
};

const idParams = z.strictObject({ id: resourceId.describe('MCP upstream id') });

/** Sign-in to OAuth upstreams: start it, see and forget the connection, and poll a started sign-in. */
export function upstreamOAuthOperations(deps: UpstreamOAuthOperationDeps): AnyOperation[] {
  const { upstreams, connections, oauth, clock } = deps;
  const upstreamKind = upstreamRecordKind(upstreams);

  const start = defineOperation({
    name: 'mcp.upstreams.oauth.start',
    method: 'POST',
    path: '/mcp/upstreams/:id/oauth/start',
    summary: 'Start signing in to an OAuth upstream: answers the URL to open in the browser (authorization code with PKCE)',
    description:
      "Finds the authorization server (the server's RFC 9728 metadata, then RFC 8414 or OpenID metadata) or uses the upstream's OAuth app, registers " +
      "a client (RFC 7591) when there is no app and none was registered yet, and answers the authorization URL. The browser comes back to the gateway's " +
      'callback, which stores the tokens; GET /mcp/oauth/status?state= says when it finished. The sign-in expires after a few minutes and is single use.',
    scope: 'mcp:write',
    readOnly: false,
    params: idParams,
    resource: { kind: upstreamKind, access: 'write', in: 'path', field: 'id' },
    errors: [
      'upstream_not_oauth',
      'oauth_public_url_missing',
      'oauth_discovery_failed',
      'oauth_registration_unsupported',
      'oauth_registration_failed',
      'oauth_url_refused',
      'oauth_app_not_found',
    ],
    output: oauthStartView,
    async handler(_input, { credential, authorization }) {
      const upstream = authorizedRecord(authorization, upstreamKind).record;
      const started = await oauth.start(upstream, starterOf(credential));
      return { object: 'mcp_oauth_sign_in' as const, upstreamId: upstream.id, ...started, expiresAt: started.expiresAt.toISOString() };
    },
  });

  const get = defineOperation({
    name: 'mcp.upstreams.oauth.get',
    method: 'GET',
    path: '/mcp/upstreams/:id/oauth',
    summary: "An OAuth upstream's connection: connected, not connected or needing a new sign-in, with its scopes and token expiry (never a token)",
    scope: 'mcp:read',
    readOnly: true,
    params: idParams,
    resource: { kind: upstreamKind, access: 'read', in: 'path', field: 'id' },
    errors: ['upstream_not_oauth'],
    output: oauthConnectionView,
    async handler(_input, { authorization }) {
      const upstream = authorizedRecord(authorization, upstreamKind).record;
      if (upstream.auth.type !== 'oauth') throw new ApiError('upstream_not_oauth', undefined, { param: 'id' });
      const connection = await connections.get(upstream.id);
      const iso = (date: Date | null | undefined) => date?.toISOString() ?? null;
      return {
        object: 'mcp_upstream_oauth' as const,
        upstreamId: upstream.id,
        status: connection?.status ?? ('not_connected' as const),
        reason: connection?.statusReason ?? null,
        issuer: connection?.issuer ?? null,
        client: connection ? (connection.oauthAppId !== null ? ('oauth_app' as const) : ('registered' as const)) : null,
        oauthAppId: connection?.oauthAppId ?? null,
        clientId: connection?.registeredClientId ?? null,
        scopes: connection?.scopes ? connection.scopes.split(' ').filter((each) => each !== '') : null,
        accessTokenExpiresAt: iso(connection?.expiresAt),
        connectedAt: iso(connection?.connectedAt),
        lastRefreshedAt: iso(connection?.lastRefreshedAt),
      };
    },
  });

  const forget = defineOperation({
    name: 'mcp.upstreams.oauth.delete',
    method: 'DELETE',
    path: '/mcp/upstreams/:id/oauth',
    summary: "Forget an OAuth upstream's tokens (revoked at its server when it offers revocation)",
    description: 'The upstream stays, not connected, until someone signs in again; a client registered for it is kept for that sign-in.',
    scope: 'mcp:write',
    readOnly: false,
    destructive: true,
    idempotent: true,
    params: idParams,
    resource: { kind: upstreamKind, access: 'write', in: 'path', field: 'id' },
    errors: ['upstream_not_oauth'],
    output: oauthDisconnectView,
    async handler(_input, { authorization }) {
      const upstream = authorizedRecord(authorization, upstreamKind).record;
      if (upstream.auth.type !== 'oauth') throw new ApiError('upstream_not_oauth', undefined, { param: 'id' });
      const { revoked } = await oauth.disconnect(upstream);
      return { object: 'mcp_upstream_oauth' as const, upstreamId: upstream.id, status: 'not_connected' as const, revoked };
    },
  });

  const status = defineOperation({
    name: 'mcp.oauth.status',
    method: 'GET',
    path: '/mcp/oauth/status',
    summary: 'Whether a sign-in you started finished: pending, connected, failed (with why) or expired',
    description: 'Only whoever started the sign-in (the same person or key) sees it; anyone else meets 404 oauth_sign_in_not_found.',
    scope: 'mcp:read',
    readOnly: true,
    query: z.strictObject({ state: z.string().min(1).max(200).describe('The state POST /mcp/upstreams/{id}/oauth/start answered') }),
    errors: ['oauth_sign_in_not_found'],
    output: oauthSignInStatusView,
    async handler({ query }, { credential }) {
      const flow = await oauth.flowByState(query.state);
      if (!flow || flow.organizationId !== credential.organizationId || flow.startedBy !== starterOf(credential)) {
        throw new ApiError('oauth_sign_in_not_found', undefined, { param: 'state' });
      }
      // An exchange that never finished (its replica died) also ends as expired.
      const expired = (flow.status === 'pending' || flow.status === 'exchanging') && flow.expiresAt.getTime() <= clock().getTime();
      const shown: 'pending' | 'connected' | 'failed' | 'expired' = expired ? 'expired' : flow.status === 'exchanging' ? 'pending' : flow.status;
      return {
        object: 'mcp_oauth_sign_in_status' as const,
        upstreamId: flow.upstreamId,
        status: shown,
        error: flow.status === 'failed' ? { code: flow.errorCode ?? 'failed', message: flow.errorMessage ?? '' } : null,
        expiresAt: flow.expiresAt.toISOString(),
      };
    },
  });

  return [start, get, forget, status];
}

/**
 * The callback authorization servers send the browser to: public (the browser carries no
 * credential of ours), found by `state` alone, used once. Answers a small page saying how it went;
 * the starter's UI learns the same from GET /mcp/oauth/status.
 */
export function mountOAuthCallback(scope: FastifyInstance, deps: Pick<UpstreamOAuthOperationDeps, 'oauth' | 'upstreams' | 'afterConnect'>): void {
  scope.get(CALLBACK_PATH, { config: { auth: false, surface: 'client' } }, async (request, reply) => {
    const outcome = await deps.oauth.complete(request.query as Record<string, unknown>);
    if (!outcome.ok) {
      return sendPage(reply, {
        title: 'Sign-in failed',
        status: 400,
        body: html`<h1>Sign-in failed</h1>
<p role="alert">${outcome.message}</p>`,
      });
    }
    const upstream = await deps.upstreams.byId(outcome.upstreamId);
    if (upstream) await deps.afterConnect(upstream);
    return sendPage(reply, {
      title: 'Signed in',
      body: html`<h1>Signed in</h1>
<p>The tool gateway is connected to ${upstream?.name ?? 'the MCP server'}. You may close this window.</p>`,
    });
  });
}
