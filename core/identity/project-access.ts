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
  if (credential.kind === 'key') return credential.scopes.has('projects:write') ? null : [credential.projectId];
  if (credential.kind === 'connector') return [credential.projectId];
  if (credential.role === 'owner' || credential.role === 'admin') return null;
  return identity.projectMembers.projectIdsOf(credential.organizationId, credential.personId);
}
