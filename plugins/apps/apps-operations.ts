import { randomUUID } from 'node:crypto';
import { rm } from 'node:fs/promises';
import { z } from 'zod';
import { authorizedProject, authorizedRecord, type RecordKind } from '../../core/identity/authorization.ts';
import { visibleProjectIds } from '../../core/identity/project-access.ts';
import type { JobQueue } from '../../core/jobs/job-queue.ts';
import { ApiError } from '../../core/kernel/errors.ts';
import { defineOperation, type AnyOperation } from '../../core/operations/operations.ts';
import type { BlobStore } from '../../core/ports/blobs.ts';
import type { Transaction } from '../../core/ports/database.ts';
import type { IdentityStores } from '../../core/ports/identity.ts';
import type { GitHost } from '../githost/git-host.ts';
import type { AppKeys } from '../keys/app-keys.ts';
import { actorOf } from '../../core/operations/operation-events.ts';
import { type AppEnv, assertEnvVars, ENV_REFUSALS, type RuntimeEnv } from './app-env.ts';
import { assertNameFree, createAppWithDeployment } from './app-creation.ts';
import type { AppsHost } from './apps-host.ts';
import { type AppRecord, type AppsStore, DEPLOY_HISTORY, type DeploymentRecord, type ServiceRecord } from './apps-store.ts';
import { appListView, appView, deployAnswerView, deploymentView, type ServiceState, toAppView, toDeploymentView, toServiceView } from './apps-views.ts';
import { MAX_START_COMMAND_CHARS, missingEnv } from './build-decision/index.ts';
import { buildLogStream, followBuildLog } from './build-log.ts';
import type { JobLogs } from '../../core/jobs/job-logs.ts';
import { enqueueDeployment } from './deploy-pipeline.ts';
import { followQuery, followRuntimeLog, lastRuntimeLines, runtimeLogView } from './log-operations.ts';
import { decideFromGitHost } from './source-checkout.ts';
import './apps-errors.ts';

/** The one region of a single machine: apps run beside the service. */
export const LOCAL_CELL = 'local';

export const appName = z.string().regex(/^[a-z0-9]([a-z0-9-]{0,38}[a-z0-9])?$/, 'lowercase letters, digits and dashes, 1 to 40 characters, not starting or ending with a dash');
const envName = z.string().regex(/^[A-Za-z_][A-Za-z0-9_]{0,127}$/, 'a variable name: letters, digits and underscores');
export const envMap = z
  .record(envName, z.string().max(32_768))
  .refine((env) => Object.keys(env).length <= 200, 'at most 200 variables')
  .describe('Variables the app runs with (values are stored encrypted); PORT and SVC_* are set by the service');
const relativeDir = z.string().min(1).max(500).describe('The app’s folder in the repository, relative to its top');
const startCommand = z.string().min(1).max(MAX_START_COMMAND_CHARS).describe('One line, at most 300 characters');
const idParams = z.strictObject({ id: z.uuid() });

const deployFromGitHostBody = z.strictObject({
  repo: z.string().min(1).max(200).describe('A repository of the organisation’s git host'),
  name: appName.optional().describe('The app’s name (default: the repository’s); its address is <name>.<baseDomain> when free'),
  branch: z.string().min(1).max(255).optional().describe('The branch deployed, and followed on push (default: the repository’s default branch)'),
  rootDir: relativeDir.optional(),
  startCommand: startCommand.optional(),
  env: envMap.optional(),
  databaseEnabled: z.boolean().optional().describe('A provided database (not offered by this service yet: true is refused)'),
  deployOnPush: z.boolean().optional().describe('Deploy every push to the branch (default true)'),
  cell: z.string().min(1).max(50).optional().describe('The region, from GET /apps/regions (default: local)'),
  projectId: z.uuid().optional().describe('The project the app belongs to (default: the key’s, else the default project)'),
});

const regionsView = z
  .object({
    object: z.literal('list'),
    data: z.array(
      z.object({
        object: z.literal('region'),
        id: z.string(),
        name: z.string(),
        available: z.boolean().describe('Whether apps asking for what the query asked can be deployed there'),
        databases: z.boolean().describe('Whether it provides databases'),
      }),
    ),
  })
  .meta({ id: 'AppRegionList', description: 'Where apps can run (the cell field of a deploy)' });

const progressView = z
  .object({
    object: z.literal('app_progress'),
    appId: z.string(),
    status: z.string().describe('The app’s status'),
    done: z.boolean().describe('True once the latest deployment is live or failed'),
    deployment: deploymentView.nullable().describe('The latest deployment'),
  })
  .meta({ id: 'AppProgress', description: 'The progress of an app’s latest deployment' });

const deploymentListView = z.object({ object: z.literal('list'), data: z.array(deploymentView) }).meta({ id: 'DeploymentList', description: 'The last 20 deployments, newest first' });

const buildLogView = z
  .object({
    object: z.literal('build_log'),
    deploymentId: z.string(),
    complete: z.boolean().describe('False while the deployment runs: the lines so far; the whole log is stored when it ends'),
    lines: z.array(z.string()).describe('`<ISO time> <stream> <text>`'),
  })
  .meta({ id: 'BuildLog', description: 'What a deployment’s checkout, build and start printed' });

const buildDecisionView = z
  .object({
    object: z.literal('build_decision'),
    serviceId: z.string().nullable(),
    commit: z.string().nullable(),
    decision: z.record(z.string(), z.unknown()).nullable().describe('Framework, commands, root dir and why each was chosen'),
    envKeys: z.array(z.string()).nullable(),
    missingEnv: z.array(z.string()).nullable(),
  })
  .meta({ id: 'BuildDecisionView', description: 'How the app is built and started, and why' });

const serviceActionView = z.object({ object: z.literal('service'), id: z.string(), state: z.string() }).meta({ id: 'ServiceAction', description: 'The service after stop or start' });

const okView = z.object({ object: z.literal('ok'), id: z.string(), deleted: z.literal(true) }).meta({ id: 'AppDeleted', description: 'The app is gone' });

export interface AppsOperationDeps {
  store: AppsStore;
  host: AppsHost;
  git: GitHost;
  env: AppEnv;
  /** The stored variables plus the managed SVC_* ones: what an instance starts with. */
  runtimeEnv: RuntimeEnv;
  /** The app's own key (SVC_API_KEY), made with the app and revoked with it. */
  appKeys: AppKeys;
  jobs: JobQueue;
  blobs: BlobStore;
  /** Running builds' logs (build-log.ts), read from whichever replica the build runs on. */
  jobLogs: JobLogs;
  identity: IdentityStores;
  clock: () => Date;
  /** `http://<slug>.<baseDomain>:<port>`. */
  urlOf: (slug: string) => string;
  /** Removes an app's proxy request rows (ids, not foreign keys). */
  database: { query(sql: string, params?: readonly unknown[]): Promise<unknown> };
  /**
   * What else goes with a deleted app (upkeep/: its stored files): called in the deletion's
   * transaction; what it answers runs once that committed, before the deletion answers.
   */
  onAppDelete?: (tx: Transaction, app: AppRecord) => Promise<() => Promise<void>>;
}

export function appRecordKind(store: AppsStore): RecordKind<AppRecord> {
  return {
    name: 'app',
    notFound: 'app_not_found',
    async find(organizationId, id) {
      const app = await store.app(organizationId, id);
      return app ? { record: app, projectId: app.projectId } : null;
    },
  };
}

export function serviceRecordKind(store: AppsStore): RecordKind<{ service: ServiceRecord; app: AppRecord }> {
  return {
    name: 'service',
    notFound: 'service_not_found',
    async find(organizationId, id) {
      const service = await store.service(organizationId, id);
      const app = service ? await store.app(organizationId, service.appId) : null;
      return service && app ? { record: { service, app }, projectId: app.projectId } : null;
    },
  };
}

export function deploymentRecordKind(store: AppsStore): RecordKind<{ deployment: DeploymentRecord; service: ServiceRecord }> {
  return {
    name: 'deployment',
    notFound: 'deployment_not_found',
    async find(organizationId, id) {
      const deployment = await store.deployment(organizationId, id);
      const service = deployment ? await store.service(organizationId, deployment.serviceId) : null;
      const app = service ? await store.app(organizationId, service.appId) : null;
      return deployment && service && app ? { record: { deployment, service }, projectId: app.projectId } : null;
    },
  };
}

const UNFINISHED: readonly string[] = ['queued', 'cloning', 'building', 'starting'];

export function appsOperations(deps: AppsOperationDeps): AnyOperation[] {
  const { store, host, git, env, jobs, clock } = deps;
  const appKind = appRecordKind(store);
  const serviceKind = serviceRecordKind(store);
  const deploymentKind = deploymentRecordKind(store);
  const readApp = { kind: appKind, access: 'read', in: 'path', field: 'id' } as const;
  const writeApp = { kind: appKind, access: 'write', in: 'path', field: 'id' } as const;
  const readService = { kind: serviceKind, access: 'read', in: 'path', field: 'id' } as const;
  const writeService = { kind: serviceKind, access: 'write', in: 'path', field: 'id' } as const;

  async function stateOf(service: ServiceRecord, history: DeploymentRecord[]): Promise<ServiceState> {
    const latest = history[0];
    const live = history.find((entry) => entry.status === 'live');
    if (!live) return latest && latest.status !== 'failed' ? 'deploying' : latest ? 'failed' : 'stopped';
    if (service.desired === 'stopped') return 'stopped';
    if (host.running) {
      const status = await host.runtime().status(service.id);
      return status.state;
    }
    return service.routeTarget ? 'running' : 'starting';
  }

  async function viewOf(app: AppRecord) {
    const services = await Promise.all(
      (await store.services(app.id)).map(async (service) => toServiceView(service, deps.urlOf(app.slug), await stateOf(service, await store.history(service.id, 5)))),
    );
    return toAppView(app, deps.urlOf(app.slug), services);
  }

  const list = defineOperation({
    name: 'apps.list',
    method: 'GET',
    path: '/apps',
    summary: 'List apps with their live URL and status',
    scope: 'apps:read',
    readOnly: true,
    output: appListView,
    async handler(_input, { credential }) {
      const visible = await visibleProjectIds(deps.identity, credential);
      const apps = await store.apps(credential.organizationId, visible);
      return { object: 'list' as const, data: await Promise.all(apps.map(viewOf)) };
    },
  });

  const createFromGitHost = defineOperation({
    name: 'apps.create_from_githost',
    method: 'POST',
    path: '/apps/githost',
    summary: 'Deploy an app from a repository of the git host',
    description:
      'The repository is read and its build decided before anything is created: a repository that cannot build is a 400 ' +
      'naming what to change. 202 with the app, its web service and the queued deployment; poll /apps/{id}/progress.',
    scope: 'apps:deploy',
    readOnly: false,
    idempotent: false,
    status: 202,
    body: deployFromGitHostBody,
    resource: { kind: 'project', access: 'write', in: 'body', field: 'projectId', whenAbsent: 'default-project' },
    output: deployAnswerView,
    errors: [
      'githost_not_connected',
      'databases_unavailable',
      'git_repository_not_found',
      'git_repository_empty',
      'git_branch_not_found',
      'region_not_found',
      'app_name_taken',
      'multiple_apps_require_root_dir',
      'nothing_buildable',
      'root_dir_not_found',
      'multiple_lockfiles',
      'runtime_unavailable',
      'no_start_command',
      'unfinished_start_command',
      ...ENV_REFUSALS,
    ],
    async handler({ body }, { credential, transaction, authorization }) {
      const organizationId = credential.organizationId;
      const project = authorizedProject(authorization);
      assertEnvVars(body.env ?? {});
      if (body.databaseEnabled === true) {
        throw new ApiError('databases_unavailable', 'This service provides no databases to apps yet: send your own DATABASE_URL in env', { param: 'databaseEnabled' });
      }
      if (body.cell !== undefined && body.cell !== LOCAL_CELL) throw new ApiError('region_not_found', `No region ${body.cell}: GET /apps/regions lists them`, { param: 'cell' });
      const status = await git.status(organizationId);
      if (!status.connected) throw new ApiError('githost_not_connected', 'Connect the git host first (GET /githost/status)', { param: 'repo' });
      const name =
        body.name ??
        body.repo
          .toLowerCase()
          .replace(/[^a-z0-9-]+/g, '-')
          .replace(/^-+|-+$/g, '')
          .slice(0, 40);
      if (!appName.safeParse(name).success) throw new ApiError('invalid_parameter', 'Give the app a name: lowercase letters, digits and dashes', { param: 'name' });
      await assertNameFree(store, organizationId, name);
      const branch = body.branch ?? (await git.listRepos(organizationId)).find((repo) => repo.name === body.repo)?.defaultBranch ?? 'main';
      const { commit, decision } = await decideFromGitHost(git, organizationId, { repo: body.repo, branch, rootDir: body.rootDir, startCommand: body.startCommand });
      return createAppWithDeployment(deps, transaction, {
        app: {
          organizationId,
          projectId: project.id,
          name,
          sourceKind: 'githost',
          sourceRepo: body.repo,
          sourceUrl: null,
          branch,
          rootDir: body.rootDir ?? null,
          startCommand: body.startCommand ?? null,
          deployOnPush: body.deployOnPush ?? true,
          cell: LOCAL_CELL,
        },
        env: body.env ?? {},
        commit,
        decision,
        actor: actorOf(credential),
      });
    },
  });

  const get = defineOperation({
    name: 'apps.get',
    method: 'GET',
    path: '/apps/:id',
    summary: 'An app, its services, addresses and state',
    scope: null,
    readOnly: true,
    params: idParams,
    resource: readApp,
    output: appView,
    async handler(_input, { authorization }) {
      return viewOf(authorizedRecord(authorization, appKind).record);
    },
  });

  const remove = defineOperation({
    name: 'apps.delete',
    method: 'DELETE',
    path: '/apps/:id',
    summary: 'Delete an app: its running instances, its address, its deployments and build artifacts',
    description: 'The repository it deployed from stays on the git host.',
    scope: 'apps:deploy',
    readOnly: false,
    idempotent: true,
    params: idParams,
    resource: writeApp,
    output: okView,
    async handler(_input, { credential, authorization, transaction }) {
      const { record: app } = authorizedRecord(authorization, appKind);
      const services = await store.services(app.id);
      const artifacts: string[] = [];
      for (const service of services) {
        for (const deployment of await store.history(service.id, 1000)) {
          if (deployment.artifactDir) artifacts.push(deployment.artifactDir);
          if (host.running) await host.runtime().retire(deployment.id);
        }
      }
      await host.settled();
      const { revoked, after } = await transaction(async (tx) => {
        await env.forget(
          tx,
          services.map((service) => service.id),
        );
        await tx.query('DELETE FROM app_requests WHERE app_id = $1', [app.id]);
        await tx.query('DELETE FROM app_usage_samples WHERE app_id = $1', [app.id]);
        const after = await deps.onAppDelete?.(tx, app);
        await store.deleteApp(tx, app.id);
        const keys = await deps.appKeys.ofApp(tx, app.organizationId, app.id);
        for (const key of keys) await deps.appKeys.revoke(tx, app.organizationId, key.id, actorOf(credential));
        return { revoked: keys.map((key) => key.id), after };
      });
      await deps.appKeys.forget(revoked);
      await after?.();
      await host.removeRoute(app.slug);
      await Promise.all(artifacts.map((dir) => rm(dir, { recursive: true, force: true })));
      return { object: 'ok' as const, id: app.id, deleted: true as const };
    },
  });

  const regions = defineOperation({
    name: 'apps.regions',
    method: 'GET',
    path: '/apps/regions',
    summary: 'Where apps can be deployed (the cell field of a deploy)',
    scope: null,
    readOnly: true,
    query: z.strictObject({ database: z.enum(['0', '1']).describe('1: only regions that can provide a database count as available') }),
    output: regionsView,
    async handler({ query }) {
      const databases = false;
      return {
        object: 'list' as const,
        data: [{ object: 'region' as const, id: LOCAL_CELL, name: 'This machine', available: query.database === '0' || databases, databases }],
      };
    },
  });

  const progress = defineOperation({
    name: 'apps.progress',
    method: 'GET',
    path: '/apps/:id/progress',
    summary: 'The progress of the app’s latest deployment (polled after a 202)',
    scope: null,
    readOnly: true,
    params: idParams,
    resource: readApp,
    output: progressView,
    async handler(_input, { authorization }) {
      const { record: app } = authorizedRecord(authorization, appKind);
      const [service] = await store.services(app.id);
      const latest = service ? (await store.history(service.id, 1))[0] : undefined;
      const done = latest === undefined || !['queued', 'cloning', 'building', 'starting'].includes(latest.status);
      return { object: 'app_progress' as const, appId: app.id, status: app.status, done, deployment: latest ? toDeploymentView(latest) : null };
    },
  });

  const deployments = defineOperation({
    name: 'services.deployments',
    method: 'GET',
    path: '/services/:id/deployments',
    summary: 'The service’s last 20 deployments, newest first, with their timings',
    scope: null,
    readOnly: true,
    params: idParams,
    resource: readService,
    output: deploymentListView,
    async handler(_input, { authorization }) {
      const { service } = authorizedRecord(authorization, serviceKind).record;
      return { object: 'list' as const, data: (await store.history(service.id)).map(toDeploymentView) };
    },
  });

  const buildLog = defineOperation({
    name: 'deployments.logs',
    method: 'GET',
    path: '/deployments/:id/logs',
    summary: 'A deployment’s build log (checkout, install, build, start); follow=1 streams it until the deployment ends',
    description:
      'While the deployment runs, the lines so far with `complete: false`. With `follow=1` the answer is server-sent events: ' +
      '`snapshot` (this JSON), a `line` event per new line (`{line}`), and `end` once the deployment is live, failed or cancelled.',
    scope: null,
    readOnly: true,
    params: idParams,
    query: followQuery,
    resource: { kind: deploymentKind, access: 'read', in: 'path', field: 'id' },
    output: buildLogView,
    async handler(_input, { authorization }) {
      const { deployment } = authorizedRecord(authorization, deploymentKind).record;
      const stored = await storedBuildLog(deployment);
      if (stored) return { object: 'build_log' as const, deploymentId: deployment.id, complete: true, lines: stored };
      // Running (or queued): what the build printed so far, from the running job log any replica reads (build-log.ts).
      const lines = await deps.jobLogs.read(buildLogStream(deployment.id));
      // Finished meanwhile (its running log discarded once the blob was stored): the stored log.
      const now = lines.length === 0 ? await store.deploymentById(deployment.id) : null;
      const finished = now ? await storedBuildLog(now) : null;
      const complete = finished !== null;
      return { object: 'build_log' as const, deploymentId: deployment.id, complete, lines: finished ?? lines };
    },
    follow: {
      requested: (query) => query.follow === '1',
      async *stream(output, { signal }) {
        const lines = followBuildLog({
          logs: deps.jobLogs,
          deploymentId: output.deploymentId,
          from: output.lines.length,
          finished: async () => {
            const deployment = await store.deploymentById(output.deploymentId);
            return deployment ? storedBuildLog(deployment) : [];
          },
          signal,
        });
        for await (const line of lines) yield { event: 'line', data: { line } };
      },
    },
  });

  /** The stored log of a finished deployment; null while it runs (its log is not stored yet). */
  async function storedBuildLog(deployment: DeploymentRecord): Promise<string[] | null> {
    if (UNFINISHED.includes(deployment.status)) return null;
    let text = '';
    const blob = deployment.logBlob ? await deps.blobs.get(deployment.logBlob) : null;
    if (blob) for await (const chunk of blob.stream) text += chunk.toString();
    return text.split('\n').filter((line) => line.length > 0);
  }

  const runtimeLogs = defineOperation({
    name: 'services.logs',
    method: 'GET',
    path: '/services/:id/logs',
    summary: 'What the running app printed (the last 1000 lines); follow=1 streams new lines',
    description:
      'With `follow=1` the answer is server-sent events: `snapshot` (this JSON), then a `line` event per new line ' + '(`{at, deploymentId, stream, line}`) until the client disconnects.',
    scope: null,
    readOnly: true,
    params: idParams,
    query: followQuery.extend({ since: z.iso.datetime({ offset: true }).optional().describe('Only lines at or after this instant') }),
    resource: readService,
    output: runtimeLogView,
    errors: ['runtime_unavailable_here'],
    async handler({ params, query }, { authorization }) {
      const { service } = authorizedRecord(authorization, serviceKind).record;
      return { object: 'list' as const, serviceId: params.id, data: await lastRuntimeLines(host, service.id, query.since ? new Date(query.since) : undefined) };
    },
    follow: {
      requested: (query) => query.follow === '1',
      stream: (output, { signal }) => followRuntimeLog(host, output.serviceId, output.data, signal),
    },
  });

  const buildDecision = defineOperation({
    name: 'services.build',
    method: 'GET',
    path: '/services/:id/build',
    summary: 'How the service is built and started, and why; envKeys and missingEnv',
    description: 'From the latest deployment that recorded a decision; every field null until one did.',
    scope: null,
    readOnly: true,
    params: idParams,
    resource: readService,
    output: buildDecisionView,
    async handler(_input, { authorization }) {
      const { service } = authorizedRecord(authorization, serviceKind).record;
      const decided = (await store.history(service.id)).find((deployment) => deployment.decision !== null);
      const decision = decided?.decision ?? null;
      const envKeys = decision ? ((decision['envKeys'] as string[] | undefined) ?? []) : null;
      const missing = missingEnv(envKeys, { caller: [], stored: await env.names(service.id), serviceProvided: ['PORT'] });
      return { object: 'build_decision' as const, serviceId: service.id, commit: decided?.commitSha ?? null, decision, envKeys, missingEnv: missing ? [...missing] : null };
    },
  });

  const buildCheck = defineOperation({
    name: 'githost.build_check',
    method: 'GET',
    path: '/githost/build-check',
    summary: 'Whether a branch of a repository of the git host can build, and how',
    description: 'Answers the build decision, or the 400 a deploy would get, without creating anything.',
    scope: null,
    readOnly: true,
    query: z.strictObject({
      repo: z.string().min(1).max(200),
      branch: z.string().min(1).max(255).optional(),
      rootDir: relativeDir.optional(),
      startCommand: startCommand.optional(),
    }),
    output: buildDecisionView,
    errors: [
      'git_repository_not_found',
      'git_repository_empty',
      'git_branch_not_found',
      'multiple_apps_require_root_dir',
      'nothing_buildable',
      'root_dir_not_found',
      'multiple_lockfiles',
      'runtime_unavailable',
      'no_start_command',
      'unfinished_start_command',
    ],
    async handler({ query }, { credential }) {
      const branch = query.branch ?? (await git.listRepos(credential.organizationId)).find((repo) => repo.name === query.repo)?.defaultBranch ?? 'main';
      const { commit, decision } = await decideFromGitHost(git, credential.organizationId, { ...query, branch });
      return {
        object: 'build_decision' as const,
        serviceId: null,
        commit,
        decision: decision as unknown as Record<string, unknown>,
        envKeys: [...decision.envKeys],
        missingEnv: [...(missingEnv(decision.envKeys, { caller: [], stored: [], serviceProvided: ['PORT'] }) ?? [])],
      };
    },
  });

  const stop = defineOperation({
    name: 'services.stop',
    method: 'POST',
    path: '/services/:id/stop',
    summary: 'Stop serving: the app’s instances end, its address answers 503 until start',
    scope: 'apps:deploy',
    readOnly: false,
    idempotent: true,
    params: idParams,
    resource: writeService,
    output: serviceActionView,
    errors: ['runtime_unavailable_here'],
    async handler(_input, { authorization }) {
      const { service } = authorizedRecord(authorization, serviceKind).record;
      await host.stopService(service.id);
      return { object: 'service' as const, id: service.id, state: 'stopped' };
    },
  });

  const start = defineOperation({
    name: 'services.start',
    method: 'POST',
    path: '/services/:id/start',
    summary: 'Start a stopped service again from its live build (no rebuild)',
    description: 'Answers once the app passed its health check.',
    scope: 'apps:deploy',
    readOnly: false,
    idempotent: true,
    params: idParams,
    resource: writeService,
    output: serviceActionView,
    errors: ['runtime_unavailable_here', 'nothing_to_start'],
    async handler(_input, { authorization }) {
      const { service } = authorizedRecord(authorization, serviceKind).record;
      const runtime = host.runtime();
      const live = (await store.history(service.id)).find((deployment) => deployment.status === 'live');
      if (!live?.artifactDir || !live.startCommand) {
        throw new ApiError('nothing_to_start', 'The service has no live deployment to start: deploy it first');
      }
      // The live build with the variables as stored now: a change made while stopped applies here.
      const status = await runtime.status(service.id);
      if (!(status.state === 'running' && status.deploymentId === live.id)) {
        const request = { serviceId: service.id, deploymentId: live.id, artifactDir: live.artifactDir, startCommand: live.startCommand };
        await runtime.deploy({ ...request, env: await deps.runtimeEnv.of(service.id) });
      }
      await store.setDesired(service.id, 'running');
      await host.settled();
      return { object: 'service' as const, id: service.id, state: 'running' };
    },
  });

  const rollback = defineOperation({
    name: 'services.rollback',
    method: 'POST',
    path: '/services/:id/rollback',
    summary: 'Deploy an earlier deployment’s build again, without rebuilding',
    description: 'Names a deployment from the service’s last 20 whose build is kept; answers the queued deployment.',
    scope: 'apps:deploy',
    readOnly: false,
    idempotent: false,
    params: idParams,
    body: z.strictObject({ deploymentId: z.uuid().describe('A deployment from GET /services/{id}/deployments') }),
    resource: writeService,
    output: deploymentView,
    errors: ['rollback_target_not_found'],
    async handler({ body }, { authorization, transaction }) {
      const { service } = authorizedRecord(authorization, serviceKind).record;
      const target = (await store.history(service.id, DEPLOY_HISTORY)).find((deployment) => deployment.id === body.deploymentId);
      if (!target?.artifactDir || !target.startCommand) {
        throw new ApiError('rollback_target_not_found', 'No deployment with a kept build by that id in the service’s last 20', { param: 'deploymentId' });
      }
      const deployment = await transaction(async (tx) => {
        const created = await store.createDeployment(
          tx,
          {
            id: randomUUID(),
            serviceId: service.id,
            organizationId: service.organizationId,
            commitSha: target.commitSha,
            reason: 'rollback',
            rollbackOf: target.id,
            decision: target.decision,
            idempotencyKey: null,
            artifactDir: target.artifactDir,
            startCommand: target.startCommand,
            imageSizeBytes: target.imageSizeBytes,
          },
          clock(),
        );
        await enqueueDeployment(jobs, tx, created.deployment.id);
        return created.deployment;
      });
      return toDeploymentView(deployment);
    },
  });

  return [list, createFromGitHost, regions, get, remove, progress, deployments, buildLog, runtimeLogs, buildDecision, buildCheck, stop, start, rollback];
}
