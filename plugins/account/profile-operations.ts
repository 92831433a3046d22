import { z } from 'zod';
import type { Authenticator } from '../../core/identity/authenticator.ts';
import type { Credential } from '../../core/identity/credential.ts';
import { ApiError } from '../../core/kernel/errors.ts';
import { defineOperation, type AnyOperation } from '../../core/operations/operations.ts';
import type { IdentityStores } from '../../core/ports/identity.ts';
import { instantView } from '../../core/vocabulary/timestamps.ts';
import { chooseDefaultOrganization, personCredential } from './caller.ts';
// Catalogues the codes this module answers with (core/kernel/error-catalogue.ts).
import './account-errors.ts';

interface Deps {
  identity: IdentityStores;
  authenticator: Authenticator;
}

const ROLE = z.enum(['owner', 'admin', 'member']);

const profileView = z
  .object({
    object: z.literal('profile'),
    id: z.uuid().describe("The person's id"),
    name: z.string(),
    email: z.string().describe('How the person signs in; read-only here (see the operation descriptions)'),
    defaultOrganizationId: z.uuid().nullable().describe("The organisation the person's sessions act in; null when none was chosen (the oldest active membership)"),
    organization: z.object({ id: z.uuid(), name: z.string(), role: ROLE }).describe('The organisation this call acts in, and the role the person holds there'),
    createdAt: instantView,
  })
  .meta({ id: 'Profile', description: 'The calling person: name, sign-in email and default organisation' });

const profileUpdate = z.strictObject({
  name: z.string().trim().min(1).max(200).optional().describe('The name shown to the organisation (1 to 200 characters, trimmed)'),
  defaultOrganizationId: z.uuid().optional().describe("The organisation the person's sessions act in: one where the membership and the organisation are active"),
});

const EMAIL_NOTE =
  'The email is how the person signs in and where invitations are sent: it is shown here but not changed through this API (no `email` field is taken), since a change would need the new address confirmed first.';

export function profileOperations({ identity, authenticator }: Deps): AnyOperation[] {
  async function profileOf(credential: Credential) {
    const person = personCredential(credential);
    const [record, organization] = await Promise.all([identity.people.get(person.personId), identity.organizations.get(person.organizationId)]);
    if (!record || !organization) throw new ApiError('account_not_found');
    return {
      object: 'profile' as const,
      id: record.id,
      name: record.name,
      email: record.email,
      defaultOrganizationId: record.defaultOrganizationId,
      organization: { id: organization.id, name: organization.name, role: person.role },
      createdAt: record.createdAt.toISOString(),
    };
  }

  const get = defineOperation({
    name: 'account.profile.get',
    method: 'GET',
    path: '/profile',
    summary: "The calling person's profile",
    description: `A person's session (or a connector acting for the person) reads their name, email and default organisation. An API key is not a person: it is answered 403 \`person_required\` (GET /client/whoami describes a key). ${EMAIL_NOTE}`,
    scope: null,
    readOnly: true,
    personOnly: true,
    errors: ['account_not_found'],
    output: profileView,
    handler: async (_input, { credential }) => profileOf(credential),
  });

  const update = defineOperation({
    name: 'account.profile.update',
    method: 'PATCH',
    path: '/profile',
    summary: "Change the calling person's name or default organisation",
    description: `Fields left out stay as they are; an empty body changes nothing. Choosing the default organisation is the same act as POST /client/organizations/default (a session only). An API key is answered 403 \`person_required\`. ${EMAIL_NOTE}`,
    scope: null,
    readOnly: false,
    idempotent: true,
    body: profileUpdate,
    personOnly: true,
    errors: ['account_not_found', 'key_organization_fixed', 'organization_not_found', 'organization_inactive'],
    output: profileView,
    async handler({ body }, { credential }) {
      const person = personCredential(credential);
      if (body.defaultOrganizationId !== undefined) await chooseDefaultOrganization({ identity, authenticator }, credential, body.defaultOrganizationId, 'defaultOrganizationId');
      if (body.name !== undefined && !(await identity.people.update(person.personId, { name: body.name }))) throw new ApiError('account_not_found');
      return profileOf(credential);
    },
  });

  return [get, update];
}
