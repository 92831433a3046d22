import { z } from 'zod';
import { authorizedProject, authorizedRecord } from '../../core/identity/authorization.ts';
import type { Credential } from '../../core/identity/credential.ts';
import { ApiError } from '../../core/kernel/errors.ts';
import { defineOperation, type AnyOperation } from '../../core/operations/operations.ts';
import { actorOf } from '../../core/operations/operation-events.ts';
import type { Queryable, Transaction } from '../../core/ports/database.ts';
import type { IdentityStores } from '../../core/ports/identity.ts';
import type { AppKeys } from '../keys/app-keys.ts';
import { type AppEnv, assertEnvVars, ENV_NAME, ENV_REFUSALS, MANAGED_ENV_NAMES, reservedEnvName, type RuntimeEnv } from './app-env.ts';
import type { AppsHost } from './apps-host.ts';
import type { AppRecord, AppsStore, ServiceRecord } from './apps-store.ts';
import { appRecordKind, serviceRecordKind } from './apps-operations.ts';
import { HealthFailure } from './runtime/index.ts';
import './apps-errors.ts';

const MAX_VARS = 200;
const MAX_VALUE_CHARS = 32_768;
/** What the secret vault holds for one service's variables, JSON-encoded (core/services/secret-vault.ts). */
const MAX_ENV_BYTES = 60 * 1024;

const envName = z.string().regex(ENV_NAME, 'a variable name: letters, digits and underscores, not starting with a digit');
const version = z.number().int().min(0).describe('The `version` GET answered: refused 409 env_conflict when another change landed since');
const idParams = z.strictObject({ id: z.uuid() });

const changeBody = z
  .strictObject({
    vars: z.record(envName, z.string().max(MAX_VALUE_CHARS)).optional().describe('Variables to set (added or replaced); values are stored encrypted'),
    remove: z.array(envName).max(MAX_VARS).optional().describe('Names to remove; a name not set is ignored'),
    version: version.optional(),
  })
  .refine((body) => body.vars !== undefined || body.remove !== undefined, { message: 'give vars, remove or both', path: ['vars'] });

const restartOutcome = z
  .enum(['done', 'none', 'next_start', 'next_deploy', 'failed'])
  .describe(
    'done: the app restarted with the change (the new instance healthy, then swapped in); none: nothing changed; ' +
      'next_start: the service is stopped and starts with it; next_deploy: nothing is live yet, the deploy takes it; ' +
      'failed: the new instance failed its health check, the running one keeps serving (restartFailure says why)',
  );

const envView = z
  .object({
    object: z.literal('service_env'),
    serviceId: z.string(),
    version: z.number().describe('Changes sent with this version are refused 409 once another landed'),
    canReveal: z.boolean().describe('Whether this caller may read the values (apps:deploy and a write role on the project)'),
    vars: z.array(z.object({ name: z.string(), value: z.string().nullable().describe('Null with reveal=0 or when canReveal is false') })),
    managed: z
      .array(
        z.object({
          name: z.enum(MANAGED_ENV_NAMES),
          value: z.string().nullable().describe('SVC_API_KEY is never shown (its hint is); the URLs are'),
          hint: z.string().nullable().describe('SVC_API_KEY: the key’s hint'),
          keyId: z.string().nullable().describe('SVC_API_KEY: the app’s key id'),
        }),
      )
      .describe('Set by the service at every start; read-only'),
  })
  .meta({ id: 'AppEnvView', description: 'A service’s variables: names, values when the caller may read them, the managed ones' });

const changeView = z
  .object({
    object: z.literal('service_env_change'),
    serviceId: z.string(),
    version: z.number(),
    set: z.array(z.string()).describe('Names whose value changed or that were added'),
    removed: z.array(z.string()),
    restart: restartOutcome,
    restartFailure: z.string().nullable(),
  })
  .meta({ id: 'AppEnvChange', description: 'What an env change wrote, and the one restart it caused' });

const keyReplacedView = z
  .object({
    object: z.literal('gateway_key_replacement'),
    serviceId: z.string(),
    keyId: z.string().describe('The app’s key now'),
    hint: z.string(),
    previousKeyId: z.string().nullable().describe('Revoked once the app ran healthy with the new key; null if there was none'),
    replaced: z.boolean().describe('False when the restart failed: the new key is revoked and the old one kept'),
    restart: restartOutcome,
    restartFailure: z.string().nullable(),
  })
  .meta({ id: 'GatewayKeyReplacement', description: 'The app’s own key after a replacement' });

const groupView = z
  .object({
    object: z.literal('app_group'),
    appId: z.string(),
    projectId: z.string().describe('The project the app, and its key, belong to now'),
    keyIds: z.array(z.string()).describe('The app’s keys that moved with it'),
  })
  .meta({ id: 'AppGroup', description: 'An app moved to a project, its own key with it' });

export interface EnvOperationDeps {
  store: AppsStore;
  host: AppsHost;
  env: AppEnv;
  runtimeEnv: RuntimeEnv;
  appKeys: AppKeys;
  identity: IdentityStores;
  /** Reads outside a transaction (the app's keys). */
  database: Queryable;
}

type InTransaction = <T>(fn: (tx: Transaction) => Promise<T>) => Promise<T>;

type Restart = { restart: z.output<typeof restartOutcome>; restartFailure: string | null };

export function envOperations(deps: EnvOperationDeps): AnyOperation[] {
  const { store, host, env, runtimeEnv, appKeys, identity } = deps;
  const serviceKind = serviceRecordKind(store);
  const appKind = appRecordKind(store);
  const readService = { kind: serviceKind, access: 'read', in: 'path', field: 'id' } as const;
  const writeService = { kind: serviceKind, access: 'write', in: 'path', field: 'id' } as const;

  /** Reveal: apps:deploy (who may change the values may read them) and a write role on the app's project. */
  async function mayReveal(credential: Credential, projectId: string): Promise<boolean> {
    if (!credential.scopes.has('apps:deploy')) return false;
    if (credential.kind === 'key') return true;
    if (credential.role === 'owner' || credential.role === 'admin') return true;
    const membership = await identity.projectMembers.get(projectId, credential.personId);
    return membership !== null && membership.role !== 'viewer';
  }

  /** How the change reaches the app: one restart when it runs, none when stopped or nothing is live. */
  async function plannedRestart(service: ServiceRecord): Promise<'restart' | 'next_start' | 'next_deploy'> {
    if (service.desired === 'stopped') return 'next_start';
    const live = (await store.history(service.id)).find((deployment) => deployment.status === 'live');
    if (!live?.artifactDir || !live.startCommand) return 'next_deploy';
    // Checked before anything is written: a process running no runtime cannot restart the app.
    host.runtime();
    return 'restart';
  }

  /** Deploys the live artifact again with the service's env as stored now: new instance healthy, swapped in, old stopped. */
  async function restart(service: ServiceRecord, planned: Awaited<ReturnType<typeof plannedRestart>>): Promise<Restart> {
    if (planned !== 'restart') return { restart: planned, restartFailure: null };
    const live = (await store.history(service.id)).find((deployment) => deployment.status === 'live');
    if (!live?.artifactDir || !live.startCommand) return { restart: 'next_deploy', restartFailure: null };
    try {
      await host.runtime().deploy({
        serviceId: service.id,
        deploymentId: live.id,
        artifactDir: live.artifactDir,
        startCommand: live.startCommand,
        env: await runtimeEnv.of(service.id),
      });
    } catch (error) {
      if (error instanceof HealthFailure) return { restart: 'failed', restartFailure: error.probe };
      throw error;
    }
    await host.settled();
    return { restart: 'done', restartFailure: null };
  }

  /** Writes the new variables if still at `expected`, else 409 with nothing written. */
  async function write(transaction: InTransaction, service: ServiceRecord, vars: Record<string, string>, expected: number): Promise<number> {
    const size = Buffer.byteLength(JSON.stringify(vars), 'utf8');
    if (size > MAX_ENV_BYTES) throw new ApiError('invalid_env_value', `The variables would take ${size} bytes; at most ${MAX_ENV_BYTES}`, { param: 'vars' });
    const written = await transaction((tx) => env.replace(tx, service.id, vars, expected));
    if (written === null) throw new ApiError('env_conflict', undefined, { param: 'version' });
    return written;
  }

  const get = defineOperation({
    name: 'services.env',
    method: 'GET',
    path: '/services/:id/env',
    summary: 'The service’s variables: names, values for who may read them, and the managed SVC_* ones',
    description:
      'Values are shown to a caller holding apps:deploy with a write role on the app’s project (owners, admins, ' +
      'developers; keys with apps:deploy); to everyone else who reads the project they are null with canReveal false. ' +
      'An app’s own key is refused (403). reveal=0 asks for names only.',
    scope: null,
    readOnly: true,
    params: idParams,
    query: z.strictObject({ reveal: z.enum(['0', '1']).optional().describe('0: names only (values null)') }),
    resource: readService,
    errors: ['env_listing_forbidden'],
    output: envView,
    async handler({ query }, { credential, authorization }) {
      const { service, app } = authorizedRecord(authorization, serviceKind).record;
      if (credential.kind === 'key' && credential.appId !== null) throw new ApiError('env_listing_forbidden');
      const canReveal = await mayReveal(credential, app.projectId);
      const reveal = canReveal && query.reveal !== '0';
      const { vars, version } = await env.readVersioned(service.id);
      const key = await env.gatewayKey(service.id);
      const apiKey = key ? await identity.apiKeys.get(app.organizationId, key.keyId) : null;
      const managed = runtimeEnv.managed(key);
      return {
        object: 'service_env' as const,
        serviceId: service.id,
        version,
        canReveal,
        vars: Object.keys(vars)
          .sort()
          .map((name) => ({ name, value: reveal ? vars[name]! : null })),
        managed: MANAGED_ENV_NAMES.map((name) => ({
          name,
          value: name === 'SVC_API_KEY' ? null : managed[name],
          hint: name === 'SVC_API_KEY' ? (apiKey?.hint ?? null) : null,
          keyId: name === 'SVC_API_KEY' ? (key?.keyId ?? null) : null,
        })),
      };
    },
  });

  async function change(transaction: InTransaction, service: ServiceRecord, set: Record<string, string>, remove: readonly string[], expected: number | undefined) {
    const current = await env.readVersioned(service.id);
    if (expected !== undefined && expected !== current.version) throw new ApiError('env_conflict', undefined, { param: 'version' });
    const next = { ...current.vars };
    const changed = Object.entries(set).filter(([name, value]) => current.vars[name] !== value);
    for (const [name, value] of changed) next[name] = value;
    const removed = remove.filter((name) => name in next);
    for (const name of removed) delete next[name];
    if (changed.length === 0 && removed.length === 0) {
      return { version: current.version, set: [], removed: [], restart: 'none' as const, restartFailure: null };
    }
    if (Object.keys(next).length > MAX_VARS) throw new ApiError('invalid_parameter', `At most ${MAX_VARS} variables`, { param: 'vars' });
    const planned = await plannedRestart(service);
    const written = await write(transaction, service, next, current.version);
    return { version: written, set: changed.map(([name]) => name).sort(), removed: [...removed].sort(), ...(await restart(service, planned)) };
  }

  const post = defineOperation({
    name: 'services.env_change',
    method: 'POST',
    path: '/services/:id/env',
    summary: 'Set and remove variables: one restart per request, none when nothing changes',
    description:
      'The running app restarts once, with no downtime: a new instance with the new variables must pass its health check ' +
      'before it takes the traffic. A stopped service gets them at its next start. Nothing is rebuilt. 409 env_conflict ' +
      '(nothing written) when another change landed since the version sent, or since this request read the variables.',
    scope: 'apps:deploy',
    readOnly: false,
    idempotent: true,
    params: idParams,
    body: changeBody,
    resource: writeService,
    errors: [...ENV_REFUSALS, 'env_conflict', 'runtime_unavailable_here'],
    output: changeView,
    async handler({ body }, { authorization, transaction }) {
      const { service } = authorizedRecord(authorization, serviceKind).record;
      const vars = body.vars ?? {};
      const remove = body.remove ?? [];
      for (const [index, name] of remove.entries()) {
        const reserved = reservedEnvName(name);
        if (reserved) throw new ApiError('reserved_env_name', reserved, { param: `remove.${index}` });
        if (name in vars) throw new ApiError('invalid_parameter', `${name} is both set and removed`, { param: `remove.${index}` });
      }
      assertEnvVars(vars, 'vars');
      return { object: 'service_env_change' as const, serviceId: service.id, ...(await change(transaction, service, vars, remove, body.version)) };
    },
  });

  const remove = defineOperation({
    name: 'services.env_delete',
    method: 'DELETE',
    path: '/services/:id/env/:name',
    summary: 'Remove one variable: the app restarts once; the value cannot be recovered',
    scope: 'apps:deploy',
    readOnly: false,
    destructive: true,
    idempotent: false,
    params: z.strictObject({ id: z.uuid(), name: envName.describe('The variable') }),
    query: z.strictObject({
      version: z.coerce
        .number()
        .int()
        .min(0)
        .optional()
        .describe(version.description ?? ''),
    }),
    resource: writeService,
    errors: ['env_var_not_found', 'reserved_env_name', 'env_conflict', 'runtime_unavailable_here'],
    output: changeView,
    async handler({ params, query }, { authorization, transaction }) {
      const { service } = authorizedRecord(authorization, serviceKind).record;
      const reserved = reservedEnvName(params.name);
      if (reserved) throw new ApiError('reserved_env_name', reserved, { param: 'name' });
      const { vars } = await env.readVersioned(service.id);
      if (!(params.name in vars)) throw new ApiError('env_var_not_found', `The service has no variable ${params.name}`, { param: 'name' });
      const outcome = await change(transaction, service, {}, [params.name], query.version);
      // Removed by another change between the read and the write: what this request asked is not what happened.
      if (outcome.removed.length === 0) throw new ApiError('env_conflict', undefined, { param: 'name' });
      return { object: 'service_env_change' as const, serviceId: service.id, ...outcome };
    },
  });

  const replaceKey = defineOperation({
    name: 'services.gateway_key_replace',
    method: 'POST',
    path: '/services/:id/gateway-key/replace',
    summary: 'Give the app a new SVC_API_KEY: one restart; the old key is revoked once the app runs healthy with the new one',
    description:
      'A stopped service (or one with nothing live) gets the new key at its next start and the old key is revoked at once. ' +
      'If the restarted app fails its health check, the new key is revoked and the old one kept (replaced false).',
    scope: 'apps:deploy',
    readOnly: false,
    idempotent: false,
    params: idParams,
    resource: writeService,
    errors: ['runtime_unavailable_here'],
    output: keyReplacedView,
    async handler(_input, { credential, authorization, transaction }) {
      const { service, app } = authorizedRecord(authorization, serviceKind).record;
      const actor = actorOf(credential);
      const previous = await env.gatewayKey(service.id);
      const planned = await plannedRestart(service);
      const created = await transaction(async (tx) => {
        const made = await appKeys.create(tx, { organizationId: app.organizationId, projectId: app.projectId, appId: app.id, name: appKeyName(app), actor });
        await env.putGatewayKey(tx, service.id, { keyId: made.key.id, token: made.token });
        return made.key;
      });
      const outcome = await restart(service, planned);
      const failed = outcome.restart === 'failed';
      const revoked = failed ? created.id : previous?.keyId;
      await transaction(async (tx) => {
        if (failed && previous) await env.putGatewayKey(tx, service.id, previous);
        if (revoked) await appKeys.revoke(tx, app.organizationId, revoked, actor);
      });
      if (revoked) await appKeys.forget([revoked]);
      const current = failed ? (previous ? await identity.apiKeys.get(app.organizationId, previous.keyId) : null) : created;
      return {
        object: 'gateway_key_replacement' as const,
        serviceId: service.id,
        keyId: current?.id ?? created.id,
        hint: current?.hint ?? created.hint,
        previousKeyId: previous?.keyId ?? null,
        replaced: !failed,
        ...outcome,
      };
    },
  });

  const group = defineOperation({
    name: 'apps.group',
    method: 'POST',
    path: '/apps/:id/group',
    summary: 'Move an app to another project; its own key moves with it',
    description: 'The one way an app’s key changes project: PATCH /keys/{id} of that key answers 409 app_owned_key. ' + 'The caller writes both the app’s project and the destination.',
    scope: 'apps:deploy',
    readOnly: false,
    idempotent: true,
    params: idParams,
    body: z.strictObject({ projectId: z.uuid().describe('The project the app moves to') }),
    resource: [
      { kind: appKind, access: 'write', in: 'path', field: 'id' },
      { kind: 'project', access: 'write', in: 'body', field: 'projectId' },
    ],
    output: groupView,
    async handler(_input, { credential, authorization, transaction }) {
      const { record: app } = authorizedRecord(authorization, appKind);
      const project = authorizedProject(authorization);
      if (project.id === app.projectId) {
        const keys = await appKeys.ofApp(deps.database, app.organizationId, app.id);
        return { object: 'app_group' as const, appId: app.id, projectId: app.projectId, keyIds: keys.map((key) => key.id) };
      }
      const moved = await transaction(async (tx) => {
        await store.setProject(tx, app.id, project.id);
        return appKeys.move(tx, app.organizationId, app.id, project.id, actorOf(credential));
      });
      await appKeys.forget(moved.map((key) => key.id));
      return { object: 'app_group' as const, appId: app.id, projectId: project.id, keyIds: moved.map((key) => key.id) };
    },
  });

  return [get, post, remove, replaceKey, group];
}

/** The name the app's key is listed under. */
export function appKeyName(app: Pick<AppRecord, 'name'>): string {
  return `app ${app.name}`;
}
