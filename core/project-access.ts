import type { Credential } from './credential.ts';
import { ApiError } from './errors.ts';
import type { IdentityStores, Project } from './ports/identity.ts';

export type AccessMode = 'read' | 'write';

/**
 * Who may act on a project:
 * - an API key on its own project; with `projects:write`, on every project of its organisation;
 * - an owner's or admin's session on every project;
 * - a member's session on projects they were added to (viewers read only).
 * Projects the caller may not see answer 404, the same as projects that do not exist.
 */
export async function requireProject(
  identity: IdentityStores,
  credential: Credential,
  projectId: string,
  mode: AccessMode,
  param = 'projectId',
): Promise<Project> {
  const project = await identity.projects.get(credential.organizationId, projectId);
  const missing = new ApiError(404, 'project_not_found', `No project ${projectId}`, { param });
  if (!project) throw missing;
  if (credential.kind === 'key') {
    if (credential.projectId === project.id || credential.scopes.has('projects:write')) return project;
    throw missing;
  }
  if (credential.role === 'owner' || credential.role === 'admin') return project;
  const membership = await identity.projectMembers.get(project.id, credential.personId);
  if (!membership) throw missing;
  if (mode === 'write' && membership.role === 'viewer') {
    throw new ApiError(403, 'project_role_insufficient', `Your role on project ${project.name} is viewer; this needs developer or admin`);
  }
  return project;
}

/** The projects a credential can see. */
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
