import type { Credential } from './credential.ts';
import type { IdentityStores, Project } from './ports/identity.ts';

/**
 * The projects a credential can see, for filtering lists: the same rules as `authorize`
 * (core/authorization.ts) applies to one project — a key its own project (every project with
 * `projects:write`), owners and admins every project, members those they have a role on.
 */
export async function visibleProjects(identity: IdentityStores, credential: Credential): Promise<Project[]> {
  const all = await identity.projects.list(credential.organizationId);
  if (credential.kind === 'key') {
    return credential.scopes.has('projects:write') ? all : all.filter((p) => p.id === credential.projectId);
  }
  if (credential.role === 'owner' || credential.role === 'admin') return all;
  const mine: Project[] = [];
  for (const project of all) {
    if (await identity.projectMembers.get(project.id, credential.personId)) mine.push(project);
  }
  return mine;
}
