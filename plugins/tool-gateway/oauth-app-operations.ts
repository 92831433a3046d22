import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import type { DomainEvents } from '../../core/events/domain-events.ts';
import { authorizedProject, authorizedRecord, type RecordKind } from '../../core/identity/authorization.ts';
import { visibleProjectIds } from '../../core/identity/project-access.ts';
import { ApiError } from '../../core/kernel/errors.ts';
import type { OutboundHttpClient } from '../../core/net/outbound-http-client.ts';
import { actorOf } from '../../core/operations/operation-events.ts';
import { type AnyOperation, defineOperation } from '../../core/operations/operations.ts';
import type { Database } from '../../core/ports/database.ts';
import type { IdentityStores } from '../../core/ports/identity.ts';
import type { SecretVault } from '../../core/services/secret-vault.ts';
import { resourceId } from '../../core/vocabulary/ids.ts';
import { listResponse, pageQuery } from '../../core/vocabulary/pagination.ts';
import type { OAuthApp, OAuthAppStore } from './oauth-app-store.ts';
import { createOAuthAppRequest, oauthAppListView, oauthAppRemovalView, oauthAppView, updateOAuthAppRequest } from './tool-gateway-schemas.ts';
import { APP_KIND, APP_SECRET } from './upstream-oauth.ts';
import { checkedCustomerUrl, MCP_PAGE_DEFAULT, MCP_PAGE_MAX } from './upstream-operations.ts';
// Catalogues the codes and event types this module answers with and emits.
import './tool-gateway-errors.ts';
import './tool-gateway-events.ts';

export interface OAuthAppOperationDeps {
  database: Database;
  apps: OAuthAppStore;
  identity: IdentityStores;
  vault: SecretVault;
  http: OutboundHttpClient;
  events: DomainEvents;
  clock: () => Date;
  allowHttp: boolean;
}

/** OAuth apps as a resource kind: reached through their project. */
export function oauthAppRecordKind(apps: OAuthAppStore): RecordKind<OAuthApp> {
  return {
    name: 'mcp oauth app',
    notFound: 'oauth_app_not_found',
    async find(organizationId, id) {
      const app = await apps.get(organizationId, id);
      return app ? { record: app, projectId: app.projectId } : null;
    },
  };
}

export function toOAuthAppView(app: OAuthApp) {
  return {
    object: 'mcp_oauth_app' as const,
    id: app.id,
    projectId: app.projectId,
    name: app.name,
    clientId: app.clientId,
    hasClientSecret: app.hasClientSecret,
    authorizationServerUrl: app.authorizationServerUrl,
    scopes: app.scopes,
    createdAt: app.createdAt.toISOString(),
    updatedAt: app.updatedAt.toISOString(),
  };
}

function eventData(app: OAuthApp) {
  return { oauthAppId: app.id, projectId: app.projectId, name: app.name, authorizationServerOrigin: new URL(app.authorizationServerUrl).origin };
}

const idParams = z.strictObject({ id: resourceId.describe('OAuth app id') });
const secretOf = (id: string) => ({ kind: APP_KIND, id });

/**
 * A customer's own OAuth clients (`/mcp/oauth-apps`): for authorization servers that register no
 * client dynamically (GitHub's, a company's identity provider). The secret is write-only.
 */
export function oauthAppOperations(deps: OAuthAppOperationDeps): AnyOperation[] {
  const { apps, identity, vault, http, events, clock } = deps;
  const appKind = oauthAppRecordKind(apps);
  const writeApp = { kind: appKind, access: 'write', in: 'path', field: 'id' } as const;
  const checkedServerUrl = (raw: string) =>
    checkedCustomerUrl(http, deps.allowHttp, raw, { invalid: 'oauth_url_invalid', refused: 'oauth_url_refused', param: 'authorizationServerUrl', what: 'The authorization server URL' });

  const list = defineOperation({
    name: 'mcp.oauth_apps.list',
    method: 'GET',
    path: '/mcp/oauth-apps',
    summary: 'List the OAuth apps (your own clients at authorization servers), newest first, never a secret',
    scope: 'mcp:read',
    readOnly: true,
    query: pageQuery({ defaultLimit: MCP_PAGE_DEFAULT, maxLimit: MCP_PAGE_MAX, id: resourceId }).extend({
      projectId: resourceId.optional().describe('Only apps of this project'),
    }),
    resource: { kind: 'project', access: 'read', in: 'query', field: 'projectId' },
    output: oauthAppListView,
    async handler({ query }, { credential }) {
      const visible = await visibleProjectIds(identity, credential);
      const page = await apps.page({ organizationId: credential.organizationId, visibleProjectIds: visible, projectId: query.projectId }, query);
      return listResponse(page, toOAuthAppView);
    },
  });

  const create = defineOperation({
    name: 'mcp.oauth_apps.create',
    method: 'POST',
    path: '/mcp/oauth-apps',
    summary: 'Store your own OAuth client (client id and secret at an authorization server) for upstreams to sign in with',
    description:
      'For an authorization server that does not register clients dynamically. Register the gateway there with the redirect URI ' +
      'POST /mcp/upstreams/{id}/oauth/start answers (<public URL>/client/mcp/oauth/callback). The authorization server URL is checked as upstream URLs are.',
    scope: 'mcp:write',
    readOnly: false,
    body: createOAuthAppRequest,
    resource: { kind: 'project', access: 'write', in: 'body', field: 'projectId', whenAbsent: 'default-project' },
    errors: ['oauth_url_invalid', 'oauth_url_refused'],
    output: oauthAppView,
    status: 201,
    async handler({ body }, { credential, transaction, authorization }) {
      const projectId = authorizedProject(authorization).id;
      const authorizationServerUrl = await checkedServerUrl(body.authorizationServerUrl);
      const id = randomUUID();
      return toOAuthAppView(
        await transaction(async (tx) => {
          const settings = { name: body.name, clientId: body.clientId, hasClientSecret: body.clientSecret !== undefined, authorizationServerUrl, scopes: body.scopes ?? null };
          const app = await apps.create(tx, { id, organizationId: credential.organizationId, projectId, ...settings }, clock());
          if (body.clientSecret !== undefined) await vault.within(tx).put(secretOf(id), APP_SECRET, body.clientSecret);
          await events.emit(tx, { type: 'mcp.oauth_app.created', organizationId: credential.organizationId, subject: id, actor: actorOf(credential), data: eventData(app) });
          return app;
        }),
      );
    },
  });

  const update = defineOperation({
    name: 'mcp.oauth_apps.update',
    method: 'PATCH',
    path: '/mcp/oauth-apps/:id',
    summary: "Change an OAuth app's name, client id, secret, authorization server or scopes",
    description: "Upstreams signed in with it keep their tokens; their next refresh uses the new client. An app's project is fixed.",
    scope: 'mcp:write',
    readOnly: false,
    idempotent: true,
    params: idParams,
    body: updateOAuthAppRequest,
    resource: writeApp,
    errors: ['oauth_url_invalid', 'oauth_url_refused', 'oauth_app_not_found'],
    output: oauthAppView,
    async handler({ params, body }, { credential, transaction, authorization }) {
      const current = authorizedRecord(authorization, appKind).record;
      const authorizationServerUrl = body.authorizationServerUrl === undefined ? current.authorizationServerUrl : await checkedServerUrl(body.authorizationServerUrl);
      return toOAuthAppView(
        await transaction(async (tx) => {
          const settings = {
            name: body.name ?? current.name,
            clientId: body.clientId ?? current.clientId,
            hasClientSecret: body.clientSecret === undefined ? current.hasClientSecret : body.clientSecret !== null,
            authorizationServerUrl,
            scopes: body.scopes === undefined ? current.scopes : body.scopes,
          };
          const changed = await apps.update(tx, credential.organizationId, current.id, settings, clock());
          if (!changed) throw new ApiError('oauth_app_not_found', `No OAuth app ${params.id}`, { param: 'id' });
          if (body.clientSecret !== undefined) {
            const scoped = vault.within(tx);
            if (body.clientSecret === null) await scoped.delete(secretOf(current.id), APP_SECRET);
            else await scoped.put(secretOf(current.id), APP_SECRET, body.clientSecret);
          }
          return changed;
        }),
      );
    },
  });

  const remove = defineOperation({
    name: 'mcp.oauth_apps.delete',
    method: 'DELETE',
    path: '/mcp/oauth-apps/:id',
    summary: 'Delete an OAuth app with its secret; refused while an upstream signs in with it',
    description: "Change those upstreams' authentication first (409 oauth_app_in_use names them): deleting would leave them unable to refresh.",
    scope: 'mcp:write',
    readOnly: false,
    destructive: true,
    idempotent: true,
    params: idParams,
    resource: writeApp,
    errors: ['oauth_app_in_use'],
    output: oauthAppRemovalView,
    async handler(_input, { credential, transaction, authorization }) {
      const app = authorizedRecord(authorization, appKind).record;
      await transaction(async (tx) => {
        const users = await apps.usersLocked(tx, app.id);
        if (users.length > 0) throw new ApiError('oauth_app_in_use', `MCP upstreams sign in with this OAuth app: ${users.slice(0, 5).join(', ')}${users.length > 5 ? '…' : ''}`);
        await apps.delete(tx, credential.organizationId, app.id);
        await vault.within(tx).deleteOwners(APP_KIND, [app.id]);
        await events.emit(tx, { type: 'mcp.oauth_app.deleted', organizationId: credential.organizationId, subject: app.id, actor: actorOf(credential), data: eventData(app) });
      });
      return { object: 'ack' as const, ok: true as const, id: app.id };
    },
  });

  return [list, create, update, remove];
}
