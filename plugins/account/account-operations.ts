import { z } from 'zod';
import { ApiError } from '../../core/kernel/errors.ts';
import { chooseDefaultOrganization } from './caller.ts';
import { defineOperation, type AnyOperation } from '../../core/operations/operations.ts';
import type { IdentityStores } from '../../core/ports/identity.ts';
import type { Authenticator } from '../../core/identity/authenticator.ts';
import { confinedProjectOf, type Credential } from '../../core/identity/credential.ts';
import { SCOPES } from '../../core/identity/scopes.ts';
import { resourceId } from '../../core/vocabulary/ids.ts';
import { listOf, listResponse, pageQuery } from '../../core/vocabulary/pagination.ts';
// Catalogues the codes this module answers with (core/kernel/error-catalogue.ts).
import './account-errors.ts';

interface Deps {
  identity: IdentityStores;
  authenticator: Authenticator;
}

/** The wire views: named schemas of the OpenAPI document (`.meta({ id })`), declared once. */
const whoamiView = z
  .object({
    object: z.literal('whoami'),
    account: z.object({ id: z.uuid(), name: z.string() }),
    project: z
      .object({ id: z.uuid(), name: z.string() })
      .nullable()
      .describe("The one project a key or a connector is confined to; null for a person's session, which reaches every project its roles allow"),
    credential: z.discriminatedUnion('type', [
      z.object({
        type: z.literal('api_key'),
        id: z.uuid(),
        name: z.string(),
        appId: z.uuid().nullable().describe('The app this key belongs to (its `SVC_API_KEY`), which it may act on as itself; null for other keys'),
      }),
      z.object({ type: z.literal('session'), personId: z.uuid(), email: z.string(), role: z.enum(['owner', 'admin', 'member']) }),
      z
        .object({
          type: z.literal('connector'),
          personId: z.uuid(),
          email: z.string(),
          role: z.enum(['owner', 'admin', 'member']).describe("The person's organisation role, which narrows the scopes granted"),
          clientId: z.string().describe('The OAuth client (the connector) the person approved'),
        })
        .describe('A person acting through a connector that signed in over OAuth at {auth_url}/mcp'),
    ]),
    scopes: z.array(z.enum(SCOPES)),
  })
  .meta({ id: 'CallerIdentity', description: 'The account, project, credential and scopes a call is made with' });

const organizationView = z
  .object({
    id: z.uuid(),
    name: z.string(),
    role: z.enum(['owner', 'admin', 'member']),
    status: z.enum(['active', 'suspended']),
  })
  .meta({ id: 'Organization', description: "An organisation the caller belongs to, and the caller's role in it" });

const organizationListView = listOf(organizationView, {
  current: resourceId,
  defaultOrganizationId: resourceId.nullable(),
  fixed: z.boolean().describe('True for API keys: a key always acts in the organisation it was issued in'),
});

const defaultOrganizationView = z
  .object({ object: z.literal('ack'), ok: z.literal(true), defaultOrganizationId: z.uuid() })
  .meta({ id: 'DefaultOrganization', description: "The organisation a person's sessions now act in" });

function credentialView(credential: Credential): z.input<typeof whoamiView>['credential'] {
  switch (credential.kind) {
    case 'key':
      return { type: 'api_key', id: credential.keyId, name: credential.keyName, appId: credential.appId };
    case 'session':
      return { type: 'session', personId: credential.personId, email: credential.email, role: credential.role };
    case 'connector':
      return { type: 'connector', personId: credential.personId, email: credential.email, role: credential.role, clientId: credential.clientId };
  }
}

export function accountOperations({ identity, authenticator }: Deps): AnyOperation[] {
  const whoami = defineOperation({
    name: 'account.whoami',
    method: 'GET',
    path: '/whoami',
    summary: 'The account, project and scopes of the calling credential',
    description:
      "An API key answers as `api_key`, a person signed in as `session` (no project: a session reaches every project its roles allow), and a connector that signed in over OAuth at `{auth_url}/mcp` as `connector`, with the one project it is confined to and the scopes it holds (those granted, narrowed by the person's role).",
    scope: null,
    readOnly: true,
    errors: ['account_not_found'],
    output: whoamiView,
    async handler(_input, { credential }) {
      const organization = await identity.organizations.get(credential.organizationId);
      if (!organization) throw new ApiError('account_not_found');
      const confinedTo = confinedProjectOf(credential);
      const project = confinedTo ? await identity.projects.get(credential.organizationId, confinedTo) : null;
      return {
        object: 'whoami' as const,
        account: { id: organization.id, name: organization.name },
        project: project ? { id: project.id, name: project.name } : null,
        credential: credentialView(credential),
        scopes: SCOPES.filter((scope) => credential.scopes.has(scope)),
      };
    },
  });

  const organizations = defineOperation({
    name: 'organizations.list',
    method: 'GET',
    path: '/organizations',
    summary: "The caller's organisations and which one it acts in",
    description: 'Memberships newest first. An API key lists none: it acts in the organisation it was issued in.',
    scope: null,
    readOnly: true,
    query: pageQuery({ defaultLimit: 50, maxLimit: 200, id: resourceId }),
    output: organizationListView,
    async handler({ query }, { credential }) {
      if (credential.kind === 'key') {
        return { object: 'list' as const, data: [], nextCursor: null, current: credential.organizationId, defaultOrganizationId: null, fixed: true };
      }
      const person = await identity.people.get(credential.personId);
      const page = await identity.memberships.pageForPerson(credential.personId, query);
      return {
        ...listResponse(page, (m) => ({
          id: m.organizationId,
          name: m.organizationName,
          role: m.role,
          status: m.status === 'active' && m.organizationStatus === 'active' ? ('active' as const) : ('suspended' as const),
        })),
        current: credential.organizationId,
        defaultOrganizationId: person?.defaultOrganizationId ?? null,
        fixed: false,
      };
    },
  });

  const setDefault = defineOperation({
    name: 'organizations.setDefault',
    method: 'POST',
    path: '/organizations/default',
    summary: "Choose the organisation a person's sessions act in",
    readOnly: false,
    idempotent: true,
    scope: null,
    body: z.strictObject({ organizationId: z.uuid() }),
    errors: ['key_organization_fixed', 'organization_not_found', 'organization_inactive'],
    output: defaultOrganizationView,
    async handler({ body }, { credential }) {
      // A connector's grant is issued inside one organisation, like a key.
      await chooseDefaultOrganization({ identity, authenticator }, credential, body.organizationId, 'organizationId');
      return { object: 'ack' as const, ok: true as const, defaultOrganizationId: body.organizationId };
    },
  });

  return [whoami, organizations, setDefault];
}
