import type { Credential } from './credential.ts';
import { confinedProjectOf } from './credential.ts';
import { reachesEveryProject } from './project-access.ts';
import type { ErrorCode } from '../kernel/error-catalogue.ts';
import { ApiError } from '../kernel/errors.ts';
import type { AnyOperation, OperationInput } from '../operations/operations.ts';
import type { ApiKey, IdentityStores, Project } from '../ports/identity.ts';
import type { OrgRole, Scope } from './scopes.ts';

export type Access = 'read' | 'write';

/**
 * A kind of record a plugin owns (a webhook endpoint, a file, a batch…) that belongs to one project
 * of an organisation, or to the organisation as a whole. Declared by the plugin next to its store
 * and named in an operation's `resource` like the kernel's kinds: `authorize` finds the record and
 * lets the caller reach it exactly when it may reach the record's project (the rules below), and
 * reach an organisation-wide record only when it reaches every project (owners' and admins'
 * sessions, keys holding `projects:write`). A record that does not exist, or that the caller may not
 * reach, answers the kind's own 404.
 */
export interface RecordKind<R = unknown> {
  /** Singular noun, as messages name it: `webhook`. */
  readonly name: string;
  /** The 404 code answered for a record that does not exist or is out of reach. */
  readonly notFound: ErrorCode;
  /** The organisation's record with this id and the project it belongs to (null: the organisation as a whole), or null. */
  find(organizationId: string, id: string): Promise<{ record: R; projectId: string | null } | null>;
}

// The record type varies per kind; each is read back through `authorizedRecord(authorization, kind)`.
// biome-ignore lint/suspicious/noExplicitAny: as above
type AnyRecordKind = RecordKind<any>;

/**
 * What an operation acts on, named by where its id sits in the validated input. The kernel
 * resolves it and checks the caller may reach it before the handler runs.
 * - `project`: a project of the organisation.
 * - `key`: an API key, reached through its project; an API key sees only its own project's keys.
 * - a `RecordKind` a plugin declares: one of its records, reached through its project.
 */
export type ResourceDeclaration<P = Record<string, unknown>, Q = Record<string, unknown>, B = unknown> = {
  readonly kind: 'project' | 'key' | AnyRecordKind;
  readonly access: Access;
  /**
   * When the field is absent: `skip` (nothing to check, the default) or, for a project,
   * `default-project` — an API key's own project, else the organisation's default project.
   */
  readonly whenAbsent?: 'skip' | 'default-project';
  /**
   * An API key reaches only its own project here, even holding `projects:write` (for a record kind:
   * only records of its own project). Elsewhere it is refused with 404 (`true`, as if the project or
   * record did not exist) or with this 403.
   */
  readonly keyOwnProjectOnly?: true | { readonly code: ErrorCode; readonly message?: string };
} & ResourceLocation<P, Q, B>;

type ResourceLocation<P, Q, B> =
  | { readonly in: 'path'; readonly field: keyof P & string }
  | { readonly in: 'query'; readonly field: keyof Q & string }
  | { readonly in: 'body'; readonly field: keyof NonNullable<B> & string };

export type AuthorizedResource =
  | { readonly kind: 'project'; readonly project: Project }
  | { readonly kind: 'key'; readonly key: ApiKey; readonly project: Project }
  /** `project` is null for a record of the organisation as a whole. */
  | { readonly kind: 'record'; readonly recordKind: AnyRecordKind; readonly record: unknown; readonly project: Project | null };

/** What `authorize` found: the resources the operation declared, resolved, in declaration order. */
export interface Authorization {
  readonly resources: readonly AuthorizedResource[];
}

export interface AuthorizationDeps {
  readonly identity: IdentityStores;
}

/**
 * What declares resources: an operation, or a raw route's `config.auth` (core/http/route-resources.ts),
 * both checked by `authorizeResources`.
 */
export interface DeclaresResources {
  readonly resource?: AnyResourceDeclaration | readonly AnyResourceDeclaration[] | undefined;
  readonly scope?: Scope | null;
  readonly ownAppKey?: true;
}

/** An app's own key calling an operation declared `ownAppKey` without holding its scope. */
function actsAsOwnApp(credential: Credential, operation: DeclaresResources): credential is Credential & { appId: string } {
  if (!operation.ownAppKey || credential.kind !== 'key' || !credential.appId) return false;
  return !operation.scope || !credential.scopes.has(operation.scope);
}

// Declarations of any input shape: an operation's are typed against its schemas, a raw route's against its raw input.
// biome-ignore lint/suspicious/noExplicitAny: as above
type AnyResourceDeclaration = ResourceDeclaration<any, any, any>;

/** What a raw route declares (core/http/fastify-types.ts `RouteAuth.resource`): any field of its path, query or JSON body. */
export type RouteResourceDeclaration = ResourceDeclaration<Record<string, unknown>, Record<string, unknown>, Record<string, unknown>>;

/** The declared resources of an operation (or a raw route) as a list (a single declaration is a list of one). */
export function resourcesOf(operation: DeclaresResources): readonly ResourceDeclaration[] {
  const declared = operation.resource;
  if (!declared) return [];
  return (Array.isArray(declared) ? declared : [declared]) as readonly ResourceDeclaration[];
}

/** The id a resource declaration names in a validated input, or undefined. */
export function resourceId(declaration: ResourceDeclaration, input: OperationInput<unknown, unknown, unknown>): string | undefined {
  const source = declaration.in === 'path' ? input.params : declaration.in === 'query' ? input.query : input.body;
  const value = (source as Record<string, unknown> | undefined)?.[declaration.field];
  return typeof value === 'string' ? value : undefined;
}

/**
 * 403 `missing_scope` when the credential lacks `scope` (owners and admins hold every scope, see
 * scopes.ts), else null. Returned, not thrown: the authentication hook asks it on every /v1 call.
 */
export function scopeRefusal(credential: Credential, scope: Scope | null): ApiError | null {
  if (scope && !credential.scopes.has(scope)) {
    return new ApiError('missing_scope', `This credential lacks the '${scope}' scope that this operation needs`);
  }
  return null;
}

/**
 * `scopeRefusal` for what an operation or a route declares: an app's own key passes a route declared
 * `ownAppKey` without the scope, on the condition `authorizeResources` then checks (the app is its own).
 */
export function declaredScopeRefusal(credential: Credential, declared: DeclaresResources): ApiError | null {
  const refusal = scopeRefusal(credential, declared.scope ?? null);
  return refusal && !actsAsOwnApp(credential, declared) ? refusal : null;
}

/**
 * The organisation roles whose sessions may call the operation (`ownerOnly` is `['owner']`), or
 * null when the operation is not reserved to people.
 */
export function sessionRolesOf(operation: AnyOperation): readonly OrgRole[] | null {
  if (operation.ownerOnly) return OWNER;
  return operation.roles ?? null;
}

const OWNER: readonly OrgRole[] = ['owner'];

/** The code a credential outside `roles` is refused with: `owner_required` for owners' acts, else `role_required`. */
export function roleRefusalCode(roles: readonly OrgRole[]): 'owner_required' | 'role_required' {
  return roles.length === 1 && roles[0] === 'owner' ? 'owner_required' : 'role_required';
}

/**
 * What the credential alone decides, before any input is read: the scope, then the roles an
 * operation is reserved to (`ownerOnly`, `roles`): only a person's own session holding one of them
 * passes; API keys and connectors never do, whoever made them. Then `personOnly`
 * (a person's session or connector; API keys never).
 */
export function authorizeCredential(credential: Credential, operation: AnyOperation): void {
  const refusal = declaredScopeRefusal(credential, operation);
  if (refusal) throw refusal;
  const roles = sessionRolesOf(operation);
  if (roles !== null && !(credential.kind === 'session' && roles.includes(credential.role))) {
    if (roleRefusalCode(roles) === 'owner_required') throw new ApiError('owner_required', `Only an owner may call ${operation.name}: sign in as an owner (API keys cannot)`);
    throw new ApiError(
      'role_required',
      `Only a person who is ${roles.join(' or ')} of the organisation may call ${operation.name}, signed in as themselves (API keys and connectors cannot)`,
    );
  }
  if (operation.personOnly && credential.kind === 'key') {
    throw new ApiError('person_required', `Only a person may call ${operation.name}: sign in, or use a person's session token (an API key is not a person)`);
  }
}

/**
 * The one decision every surface (HTTP, MCP) asks before running an operation: the scope, owner-only,
 * then each declared resource. Who reaches a project:
 * - an API key its own project; holding `projects:write`, every project of its organisation
 *   (unless the declaration keeps keys in their own project);
 * - an owner's or admin's session every project;
 * - a member's session the projects they have a role on; viewers read only (403 `project_role_insufficient`);
 * - a connector (OAuth) the one project its person picked when granting it, with that person's role there.
 * A project or key the caller may not reach answers 404, the same as one that does not exist.
 */
export async function authorize(credential: Credential, operation: AnyOperation, input: OperationInput<unknown, unknown, unknown>, deps: AuthorizationDeps): Promise<Authorization> {
  authorizeCredential(credential, operation);
  return authorizeResources(credential, operation, input, deps);
}

/**
 * The resource half of `authorize`, for a runner that already checked the credential before parsing
 * input: an operation's runner, and the kernel's preHandler for raw routes declaring `config.auth.resource`.
 */
export async function authorizeResources(
  credential: Credential,
  operation: DeclaresResources,
  input: OperationInput<unknown, unknown, unknown>,
  deps: AuthorizationDeps,
): Promise<Authorization> {
  const declarations = resourcesOf(operation);
  if (actsAsOwnApp(credential, operation)) ownAppOnly(credential, declarations[0], input);
  if (declarations.length === 0) return NO_RESOURCES;
  const resources: AuthorizedResource[] = [];
  for (const declaration of declarations) {
    const resolved = await resolve(deps.identity, credential, declaration, resourceId(declaration, input));
    if (resolved) resources.push(resolved);
  }
  return { resources };
}

const NO_RESOURCES: Authorization = { resources: [] };

/** An app's own key reaches only its app: any other id is the kind's 404, as a record out of reach is. */
function ownAppOnly(credential: Credential & { appId: string }, app: ResourceDeclaration | undefined, input: OperationInput<unknown, unknown, unknown>): void {
  if (!app || typeof app.kind !== 'object') {
    throw new Error('An operation open to an app’s own key must declare the app as its first resource');
  }
  const id = resourceId(app, input);
  if (id !== credential.appId) throw new ApiError(app.kind.notFound, `No ${app.kind.name} ${id ?? ''}`.trim(), { param: app.field });
}

async function resolve(identity: IdentityStores, credential: Credential, declaration: ResourceDeclaration, id: string | undefined): Promise<AuthorizedResource | null> {
  const param = declaration.field;
  if (typeof declaration.kind === 'object') {
    if (id === undefined) return null;
    const kind = declaration.kind;
    const missing = new ApiError(kind.notFound, `No ${kind.name} ${id}`, { param });
    const found = await kind.find(credential.organizationId, id);
    if (!found) throw missing;
    // As for a project: a key (or connector) kept in its own project meets another project's record as absent, or the 403 given.
    const confined = declaration.keyOwnProjectOnly;
    if (confined && credential.kind !== 'session' && found.projectId !== credential.projectId) {
      if (confined === true) throw missing;
      throw new ApiError(confined.code, confined.message, { param });
    }
    if (found.projectId === null) {
      if (!reachesEveryProject(credential)) throw missing;
      return { kind: 'record', recordKind: kind, record: found.record, project: null };
    }
    const project = await reachProject(identity, credential, found.projectId, declaration.access, missing);
    return { kind: 'record', recordKind: kind, record: found.record, project };
  }
  if (declaration.kind === 'key') {
    if (id === undefined) return null;
    const missing = new ApiError('key_not_found', `No API key ${id}`, { param });
    const key = await identity.apiKeys.get(credential.organizationId, id);
    const confinedTo = confinedProjectOf(credential);
    if (!key || (confinedTo !== null && key.projectId !== confinedTo)) throw missing;
    const project = await reachProject(identity, credential, key.projectId, declaration.access, missing);
    return { kind: 'key', key, project };
  }
  let projectId = id;
  if (projectId === undefined) {
    if (declaration.whenAbsent !== 'default-project') return null;
    projectId = confinedProjectOf(credential) ?? (await identity.projects.getDefault(credential.organizationId))?.id;
    if (!projectId) throw new ApiError('project_required', undefined, { param });
  }
  const missing = new ApiError('project_not_found', `No project ${projectId}`, { param });
  const confined = declaration.keyOwnProjectOnly;
  if (confined && credential.kind !== 'session' && projectId !== credential.projectId) {
    if (confined === true) throw missing;
    throw new ApiError(confined.code, confined.message, { param });
  }
  return { kind: 'project', project: await reachProject(identity, credential, projectId, declaration.access, missing) };
}

async function reachProject(identity: IdentityStores, credential: Credential, projectId: string, access: Access, missing: ApiError): Promise<Project> {
  const project = await identity.projects.get(credential.organizationId, projectId);
  if (!project) throw missing;
  if (credential.kind === 'key') {
    if (credential.projectId === project.id || credential.scopes.has('projects:write')) return project;
    throw missing;
  }
  // A connector is confined to the project picked on the consent page, then holds its person's role there.
  if (credential.kind === 'connector' && credential.projectId !== project.id) throw missing;
  if (credential.role === 'owner' || credential.role === 'admin') return project;
  const membership = await identity.projectMembers.get(project.id, credential.personId);
  if (!membership) throw missing;
  if (access === 'write' && membership.role === 'viewer') {
    throw new ApiError('project_role_insufficient', `Your role on project ${project.name} is viewer; this needs developer or admin`);
  }
  return project;
}

/** The key an operation declared as its resource (the kernel resolved it before the handler ran). */
export function authorizedKey(authorization: Authorization): ApiKey {
  for (const resource of authorization.resources) if (resource.kind === 'key') return resource.key;
  throw new Error('The operation declared no key resource');
}

/** The record of `kind` an operation declared as its resource (the kernel found and checked it before the handler ran). */
export function authorizedRecord<R>(authorization: Authorization, kind: RecordKind<R>): { record: R; project: Project | null } {
  for (const resource of authorization.resources) {
    if (resource.kind === 'record' && resource.recordKind === kind) return { record: resource.record as R, project: resource.project };
  }
  throw new Error(`The operation declared no ${kind.name} resource`);
}

/** The project an operation declared as its resource (its first `project` declaration that was present). */
export function authorizedProject(authorization: Authorization): Project {
  for (const resource of authorization.resources) if (resource.kind === 'project') return resource.project;
  throw new Error('The operation declared no project resource');
}
