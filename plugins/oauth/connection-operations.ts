import { z } from 'zod';
import type { Authenticator } from '../../core/identity/authenticator.ts';
import type { Credential } from '../../core/identity/credential.ts';
import { ORG_ROLES } from '../../core/identity/scopes.ts';
import { ApiError } from '../../core/kernel/errors.ts';
import { type AnyOperation, defineOperation } from '../../core/operations/operations.ts';
import { resourceId } from '../../core/vocabulary/ids.ts';
import { listOf, listResponse, pageQuery } from '../../core/vocabulary/pagination.ts';
import { instantView } from '../../core/vocabulary/timestamps.ts';
import type { Connection, OAuthStore } from './oauth-store.ts';
// Catalogues the codes this module answers with (core/kernel/error-catalogue.ts).
import './oauth-errors.ts';

export interface ConnectionDeps {
  store: OAuthStore;
  authenticator: Authenticator;
  clock: () => Date;
}

export const CONNECTIONS_PAGE_DEFAULT = 50;
export const CONNECTIONS_PAGE_MAX = 200;

const connectionView = z
  .object({
    object: z.literal('connector_connection'),
    id: z.uuid().describe('The grant: one approval on the consent page, the family its tokens rotate within'),
    client: z.object({
      id: z.string().describe('client_id the connector registered itself with'),
      name: z.string().nullable().describe('client_name it registered, as the consent page showed it (its own word, not verified)'),
      redirectHosts: z.array(z.string()).describe('Where it sends people back to (the hosts of its redirect URIs; a native app’s scheme)'),
    }),
    person: z.object({ id: z.uuid(), email: z.string(), name: z.string() }).describe('Who signed in and approved it'),
    projectId: z.uuid().describe('The one project it acts in'),
    scopes: z.array(z.string()),
    createdAt: instantView.describe('When it was approved'),
    expiresAt: instantView.describe('When its current refresh token expires: unless it refreshes before, it must sign in again'),
  })
  .meta({ id: 'ConnectorConnection', description: 'A connector (Claude, ChatGPT, an MCP client) signed in over OAuth and still connected' });

const connectionListView = listOf(connectionView);

const revokedView = z
  .object({ object: z.literal('ack'), ok: z.literal(true), id: z.uuid(), status: z.literal('revoked') })
  .meta({ id: 'ConnectorConnectionRevoked', description: 'Every token of the connection ended; its next call is 401' });

/** What a connector's registered redirect URIs say about where it lives. */
function redirectHosts(uris: readonly string[]): string[] {
  const hosts = uris.map((uri) => {
    try {
      const url = new URL(uri);
      return url.host || url.protocol;
    } catch {
      return uri;
    }
  });
  return [...new Set(hosts)];
}

function toView(connection: Connection): z.input<typeof connectionView> {
  return {
    object: 'connector_connection',
    id: connection.id,
    client: { id: connection.clientId, name: connection.clientName, redirectHosts: redirectHosts(connection.redirectUris) },
    person: { id: connection.personId, email: connection.personEmail, name: connection.personName },
    projectId: connection.projectId,
    scopes: connection.scopes,
    createdAt: connection.createdAt.toISOString(),
    expiresAt: connection.expiresAt.toISOString(),
  };
}

/**
 * Whose connections a caller manages: an owner or admin everyone's in the organisation, a member
 * their own (a connector acts as the person who approved it, so ending someone else's is managing
 * that person, which members do not do). Null: everyone's.
 */
function managedPerson(credential: Credential): string | null {
  if (credential.kind !== 'session') throw new Error('connections are reserved to sessions (roles)');
  return credential.role === 'member' ? credential.personId : null;
}

const WHO = [
  'A person’s own session only (API keys and connectors get 403 role_required: a connector never manages connectors, and the list names people).',
  'Owners and admins see and revoke everyone’s connections in the organisation; members only their own (another’s answers 404).',
].join(' ');

/** The connectors signed in to the organisation over this plugin's OAuth flow, and their revocation. */
export function connectionOperations(deps: ConnectionDeps): AnyOperation[] {
  const { store, authenticator, clock } = deps;

  const list = defineOperation({
    name: 'oauth.connections.list',
    method: 'GET',
    path: '/oauth/connections',
    summary: 'Connectors signed in over OAuth and still connected, newest first',
    description: `One row per approval on the consent page that still has a usable token (not revoked, its refresh token not expired). ${WHO}`,
    scope: null,
    roles: ORG_ROLES,
    readOnly: true,
    query: pageQuery({ defaultLimit: CONNECTIONS_PAGE_DEFAULT, maxLimit: CONNECTIONS_PAGE_MAX, id: resourceId }),
    output: connectionListView,
    async handler({ query }, { credential }) {
      const filter = { organizationId: credential.organizationId, personId: managedPerson(credential), now: clock() };
      return listResponse(await store.connections(filter, query), toView);
    },
  });

  const revoke = defineOperation({
    name: 'oauth.connections.revoke',
    method: 'DELETE',
    path: '/oauth/connections/:id',
    summary: 'Revoke a connector: every token of its grant ends at once, on every replica',
    description: `The connector's next call to {auth_url}/mcp is 401, and its refresh token is refused: it must sign in again. Revoking a revoked connection again answers the same. ${WHO}`,
    scope: null,
    roles: ORG_ROLES,
    readOnly: false,
    destructive: true,
    idempotent: true,
    params: z.strictObject({ id: resourceId.describe('Connection id (its grant)') }),
    errors: ['connector_connection_not_found'],
    output: revokedView,
    async handler({ params }, { credential }) {
      const grant = await store.grantOf(credential.organizationId, params.id);
      const person = managedPerson(credential);
      if (!grant || (person !== null && grant.personId !== person)) {
        throw new ApiError('connector_connection_not_found', `No connector connection ${params.id}`, { param: 'id' });
      }
      await store.revokeGrant(grant.id, clock());
      // Every replica drops the grant's cached tokens: the next call is looked up again and refused.
      await authenticator.invalidate({ kind: 'grant', id: grant.id });
      return { object: 'ack' as const, ok: true as const, id: grant.id, status: 'revoked' as const };
    },
  });

  return [list, revoke];
}
