import type { Credential } from './credential.ts';
import type { IdentityStores, Project } from '../ports/identity.ts';

/**
 * The projects a credential can see, for filtering lists: the same rules as `authorize`
 * (core/identity/authorization.ts) applies to one project — a key its own project (every project with
 * `projects:write`), owners and admins every project, members those they have a role on.
 */
export async function visibleProjects(identity: IdentityStores, credential: Credential): Promise<Project[]> {
  const all = await identity.projects.list(credential.organizationId);
  const ids = await visibleProjectIds(identity, credential);
  if (ids === null) return all;
  const visible = new Set(ids);
  return all.filter((p) => visible.has(p.id));
}

/**
 * The same rules as a filter a store applies in SQL, so a page is never short for rows dropped
 * after the query: the ids of the projects the credential sees, or null for every project of its
 * organisation.
 */
export async function visibleProjectIds(identity: IdentityStores, credential: Credential): Promise<string[] | null> {
  if (reachesEveryProject(credential)) return null;
  if (credential.kind !== 'session') return [credential.projectId];
  return identity.projectMembers.projectIdsOf(credential.organizationId, credential.personId);
}

/**
 * Whether a credential reaches every project of its organisation, and so what belongs to the
 * organisation as a whole: a key holding `projects:write`, an owner's or admin's session. A
 * connector stays in the one project it was granted, whatever its person's role.
 */
export function reachesEveryProject(credential: Credential): boolean {
  if (credential.kind === 'key') return credential.scopes.has('projects:write');
  if (credential.kind === 'connector') return false;
  return credential.role === 'owner' || credential.role === 'admin';
}
