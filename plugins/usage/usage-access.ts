import type { Credential } from '../../core/identity/credential.ts';
import type { IdentityStores } from '../../core/ports/identity.ts';
import { visibleProjectIds } from '../../core/identity/project-access.ts';
import type { Visibility } from '../../core/ports/metering.ts';

/** For operation descriptions. */
export const VISIBILITY = 'An API key sees its own project only; a person sees the projects they can read (owners and admins: all).';

/**
 * Which request-log rows a caller sees:
 * - an API key: its own project's rows only (whatever other scopes it holds);
 * - an owner's or admin's session: every row of the organisation;
 * - a member's session: rows of the projects they have a role on (any role reads).
 */
export async function usageVisibility(identity: IdentityStores, credential: Credential): Promise<Visibility> {
  // A key sees its own project's calls even when projects:write lets it see every project.
  if (credential.kind === 'key') return { organizationId: credential.organizationId, projectIds: [credential.projectId] };
  return { organizationId: credential.organizationId, projectIds: await visibleProjectIds(identity, credential) };
}

/**
 * Whether the caller may read the prompt and response of a call on `projectId`: a key holding
 * `requests:read`; an owner's or admin's session; a session whose role on that project is admin
 * or developer (viewers see the row, never the bodies).
 */
export async function mayReadBodies(identity: IdentityStores, credential: Credential, projectId: string | null): Promise<boolean> {
  if (credential.kind === 'key') return credential.scopes.has('requests:read');
  if (credential.role === 'owner' || credential.role === 'admin') return true;
  if (projectId === null) return false;
  const membership = await identity.projectMembers.get(projectId, credential.personId);
  return membership !== null && (membership.role === 'admin' || membership.role === 'developer');
}
