import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import { authorizedProject, authorizedRecord } from '../../core/identity/authorization.ts';
import { ApiError } from '../../core/kernel/errors.ts';
import { type AnyOperation, defineOperation } from '../../core/operations/operations.ts';
import { GitRepositoryNotFoundError } from '../githost/git-host.ts';
import { assertNameFree, createAppWithDeployment } from './app-creation.ts';
import { decideFromSource, type SourceDeps, sourceOf, TEMPLATE_IDS, type TemplateId, urlRefusal } from './app-sources.ts';
import { type AppsOperationDeps, appName, envMap, LOCAL_CELL, serviceRecordKind } from './apps-operations.ts';
import { ENV_REFUSALS } from './app-env.ts';
import { actorOf } from '../../core/operations/operation-events.ts';
import type { AppRecord, ServiceRecord } from './apps-store.ts';
import { deployAnswerView, deploymentView, toDeploymentView } from './apps-views.ts';
import { MAX_START_COMMAND_CHARS, missingEnv } from './build-decision/index.ts';
import type { DeployCancels } from './deploy-cancels.ts';
import { enqueueDeployment } from './deploy-pipeline.ts';
import './apps-errors.ts';
import './deploy-errors.ts';

export interface DeployOperationDeps extends AppsOperationDeps {
  sources: SourceDeps;
  cancels: DeployCancels;
}

const gitUrl = z
  .string()
  .min(1)
  .max(2000)
  .refine((value) => /^https?:\/\//i.test(value), 'an http:// or https:// URL')
  .describe('An http(s) git URL, cloned at every deploy (no user name or password in it)');
const branchName = z.string().min(1).max(255);
const cell = z.string().min(1).max(50).describe('The region, from GET /apps/regions (default: local)');
const idParams = z.strictObject({ id: z.uuid() });

const deployFromUrlBody = z.strictObject({
  gitUrl,
  name: appName.optional().describe('The app’s name (default: the repository’s, from the URL); its address is <name>.<baseDomain> when free'),
  branch: branchName.optional().describe('The branch deployed (default: the one the remote’s HEAD names)'),
  rootDir: z.string().min(1).max(500).optional().describe('The app’s folder in the repository, relative to its top'),
  startCommand: z.string().min(1).max(MAX_START_COMMAND_CHARS).optional().describe('One line, at most 300 characters'),
  env: envMap.optional(),
  cell: cell.optional(),
  projectId: z.uuid().optional().describe('The project the app belongs to (default: the key’s, else the default project)'),
});

const templateBody = z.strictObject({
  name: appName.optional().describe('The app’s name (default: the template’s id)'),
  region: cell.optional(),
  projectId: z.uuid().optional().describe('The project the app belongs to (default: the key’s, else the default project)'),
  protection: z
    .strictObject({ password: z.string().min(8).max(200).describe('Asked by the app (HTTP Basic, any user name) before it answers') })
    .optional()
    .describe('A password gate, enforced by the template app itself (its APP_PASSWORD variable)'),
});

const refusals = [
  'multiple_apps_require_root_dir',
  'nothing_buildable',
  'root_dir_not_found',
  'multiple_lockfiles',
  'runtime_unavailable',
  'no_start_command',
  'unfinished_start_command',
] as const;

const branchListView = z
  .object({
    object: z.literal('list'),
    tracked: z.string().describe('The branch the service deploys'),
    data: z.array(z.object({ object: z.literal('git_branch'), name: z.string(), commit: z.string(), tracked: z.boolean() })),
  })
  .meta({ id: 'ServiceBranchList', description: 'The branches the service’s repository has, by name' });

const cancelView = z
  .object({ object: z.literal('list'), data: z.array(deploymentView).describe('The deployments cancelled') })
  .meta({ id: 'DeploymentsCancelled', description: 'The queued and building deployments cancelled; the live version keeps serving' });

const deployOnPushView = z
  .object({ object: z.literal('service'), id: z.string(), deployOnPush: z.boolean() })
  .meta({ id: 'ServiceDeployOnPush', description: 'Whether a push to the tracked branch deploys the service' });

const freshDecisionView = z
  .object({
    object: z.literal('build_decision'),
    serviceId: z.string(),
    commit: z.string().describe('The revision decided on: the tracked branch’s head now'),
    decision: z.record(z.string(), z.unknown()).describe('Each field {value, rule, evidence}: what was chosen, by which rule, from what'),
    envKeys: z.array(z.string()),
    missingEnv: z.array(z.string()),
  })
  .meta({ id: 'FreshBuildDecision', description: 'The build decided again from the tracked branch’s head (nothing deployed)' });

/** The name a repository URL suggests: its last path segment without `.git`. */
function nameFromUrl(raw: string): string {
  const last = new URL(raw).pathname.replace(/\/+$/, '').split('/').pop() ?? '';
  return last
    .replace(/\.git$/i, '')
    .toLowerCase()
    .replace(/[^a-z0-9-]+/g, '-')
    .replace(/^-+|-+$/g, '')
    .slice(0, 40);
}

/**
 * The deploy breadth of plugins/apps/README.md: `POST /apps` (a git URL), `POST /apps/templates/{template}`,
 * and a service's `redeploy`, `branch`, `branches`, `deploy-on-push`, `deploy/cancel` and `POST build`.
 */
export function deployOperations(deps: DeployOperationDeps): AnyOperation[] {
  const { store, sources, jobs, clock } = deps;
  const serviceKind = serviceRecordKind(store);
  const readService = { kind: serviceKind, access: 'read', in: 'path', field: 'id' } as const;
  const writeService = { kind: serviceKind, access: 'write', in: 'path', field: 'id' } as const;

  const checkCell = (value: string | undefined, param: string) => {
    if (value !== undefined && value !== LOCAL_CELL) throw new ApiError('region_not_found', `No region ${value}: GET /apps/regions lists them`, { param });
  };

  async function remoteDefaultBranch(url: string): Promise<string> {
    try {
      return (await sources.remoteBranches(url)).defaultBranch ?? 'main';
    } catch (error) {
      throw urlRefusal(error, url);
    }
  }

  const createFromUrl = defineOperation({
    name: 'apps.create',
    method: 'POST',
    path: '/apps',
    summary: 'Deploy an app from a git URL',
    description:
      'The URL is cloned (http(s) to a public address only, size- and time-capped) and the build decided before anything ' +
      'is created: a repository that cannot build is a 400 naming what to change. No databaseEnabled here: send your own ' +
      'DATABASE_URL in env. Every deploy clones the URL again. 202 with the app, its web service and the queued deployment.',
    scope: 'apps:deploy',
    readOnly: false,
    idempotent: false,
    status: 202,
    body: deployFromUrlBody,
    resource: { kind: 'project', access: 'write', in: 'body', field: 'projectId', whenAbsent: 'default-project' },
    output: deployAnswerView,
    errors: ['git_url_refused', 'git_clone_failed', 'region_not_found', 'app_name_taken', ...refusals, ...ENV_REFUSALS],
    async handler({ body }, { credential, transaction, authorization }) {
      const organizationId = credential.organizationId;
      const project = authorizedProject(authorization);
      checkCell(body.cell, 'cell');
      const name = body.name ?? nameFromUrl(body.gitUrl);
      if (!appName.safeParse(name).success) throw new ApiError('invalid_parameter', 'Give the app a name: lowercase letters, digits and dashes', { param: 'name' });
      await assertNameFree(store, organizationId, name);
      const branch = body.branch ?? (await remoteDefaultBranch(body.gitUrl));
      const source = { kind: 'url' as const, url: body.gitUrl, branch };
      const { commit, decision } = await decideFromSource(sources, organizationId, source, body);
      return createAppWithDeployment(deps, transaction, {
        app: {
          organizationId,
          projectId: project.id,
          name,
          sourceKind: 'url',
          sourceRepo: null,
          sourceUrl: body.gitUrl,
          branch,
          rootDir: body.rootDir ?? null,
          startCommand: body.startCommand ?? null,
          // A URL elsewhere tells this service of no push: redeploy pulls it again.
          deployOnPush: false,
          cell: LOCAL_CELL,
        },
        env: body.env ?? {},
        commit,
        decision,
        actor: actorOf(credential),
      });
    },
  });

  const launchTemplate = defineOperation({
    name: 'apps.templates.launch',
    method: 'POST',
    path: '/apps/templates/:template',
    summary: 'Deploy one of the service’s app templates (workflow-automation, chat-ui)',
    description:
      'The template’s files are kept in the service (templates/apps/<id>) and deploy offline. `protection.password` makes ' +
      'the app ask for it (HTTP Basic) before it answers. No provided database: this service has none to give yet. 202 like a deploy.',
    scope: 'apps:deploy',
    readOnly: false,
    idempotent: false,
    status: 202,
    params: z.strictObject({
      template: z
        .string()
        .min(1)
        .max(100)
        .describe(`One of ${TEMPLATE_IDS.join(', ')}`),
    }),
    body: templateBody,
    bodyRequired: false,
    resource: { kind: 'project', access: 'write', in: 'body', field: 'projectId', whenAbsent: 'default-project' },
    output: deployAnswerView,
    errors: ['template_not_found', 'region_not_found', 'app_name_taken', ...refusals],
    async handler({ params, body }, { credential, transaction, authorization }) {
      const organizationId = credential.organizationId;
      if (!(TEMPLATE_IDS as readonly string[]).includes(params.template)) {
        throw new ApiError('template_not_found', `No template ${params.template}: ${TEMPLATE_IDS.join(', ')}`, { param: 'template' });
      }
      const template = params.template as TemplateId;
      const project = authorizedProject(authorization);
      checkCell(body?.region, 'region');
      const name = body?.name ?? template;
      await assertNameFree(store, organizationId, name);
      const { commit, decision } = await decideFromSource(sources, organizationId, { kind: 'template', template }, {});
      return createAppWithDeployment(deps, transaction, {
        app: {
          organizationId,
          projectId: project.id,
          name,
          sourceKind: 'template',
          sourceRepo: template,
          sourceUrl: null,
          branch: 'template',
          rootDir: null,
          startCommand: null,
          deployOnPush: false,
          cell: LOCAL_CELL,
        },
        env: body?.protection ? { APP_PASSWORD: body.protection.password } : {},
        commit,
        decision,
        actor: actorOf(credential),
      });
    },
  });

  /** A new deployment of the service, its job enqueued with it; no idempotency key: each request is one. */
  async function queueDeployment(
    transaction: <T>(fn: (tx: Parameters<typeof enqueueDeployment>[1]) => Promise<T>) => Promise<T>,
    service: ServiceRecord,
    commit: string | null,
    before?: (tx: Parameters<typeof enqueueDeployment>[1]) => Promise<unknown>,
  ) {
    return transaction(async (tx) => {
      await before?.(tx);
      const { deployment } = await store.createDeployment(
        tx,
        { id: randomUUID(), serviceId: service.id, organizationId: service.organizationId, commitSha: commit, reason: 'redeploy', rollbackOf: null, decision: null, idempotencyKey: null },
        clock(),
      );
      await enqueueDeployment(jobs, tx, deployment.id);
      return deployment;
    });
  }

  const redeploy = defineOperation({
    name: 'services.redeploy',
    method: 'POST',
    path: '/services/:id/redeploy',
    summary: 'Build and deploy the service again',
    description:
      '`from: head` (the default) takes the tracked branch’s head now (a git URL is cloned again); `from: live` rebuilds ' +
      'the commit the live deployment runs (a git-host app only: a URL is cloned at its branch head). Answers the queued deployment.',
    scope: 'apps:deploy',
    readOnly: false,
    idempotent: false,
    params: idParams,
    body: z.strictObject({ from: z.enum(['head', 'live']).optional().describe('head (default): the branch head now; live: the live commit') }),
    bodyRequired: false,
    resource: writeService,
    output: deploymentView,
    errors: ['nothing_to_start'],
    async handler({ body }, { authorization, transaction }) {
      const { service, app } = authorizedRecord(authorization, serviceKind).record;
      let commit: string | null = null;
      if (body?.from === 'live') {
        if (app.sourceKind !== 'githost') {
          throw new ApiError('invalid_parameter', 'Only a git-host app can rebuild its live commit: a git URL is cloned at its branch head', { param: 'from' });
        }
        const live = (await store.history(service.id)).find((deployment) => deployment.status === 'live');
        if (!live?.commitSha) throw new ApiError('nothing_to_start', 'The service has no live deployment to rebuild', { param: 'from' });
        commit = live.commitSha;
      }
      return toDeploymentView(await queueDeployment(transaction, service, commit));
    },
  });

  async function branchesOf(app: AppRecord): Promise<Array<{ name: string; commit: string }>> {
    const source = sourceOf(app);
    if (source.kind === 'template') throw new ApiError('source_has_no_branches', 'The app deploys from a template, which has no branches');
    if (source.kind === 'url') {
      try {
        return (await sources.remoteBranches(source.url)).branches;
      } catch (error) {
        throw urlRefusal(error, source.url);
      }
    }
    try {
      return await deps.git.listBranches(app.organizationId, source.repo);
    } catch (error) {
      if (error instanceof GitRepositoryNotFoundError) throw new ApiError('git_repository_not_found', `The git host has no repository ${source.repo} any more`);
      throw error;
    }
  }

  const branches = defineOperation({
    name: 'services.branches',
    method: 'GET',
    path: '/services/:id/branches',
    summary: 'The branches of the repository the service deploys from, the tracked one marked',
    scope: null,
    readOnly: true,
    params: idParams,
    resource: readService,
    output: branchListView,
    errors: ['source_has_no_branches', 'git_repository_not_found', 'git_url_refused', 'git_clone_failed'],
    async handler(_input, { authorization }) {
      const { app } = authorizedRecord(authorization, serviceKind).record;
      const list = await branchesOf(app);
      return {
        object: 'list' as const,
        tracked: app.branch,
        data: list.map((branch) => ({ object: 'git_branch' as const, name: branch.name, commit: branch.commit, tracked: branch.name === app.branch })),
      };
    },
  });

  const changeBranch = defineOperation({
    name: 'services.branch',
    method: 'POST',
    path: '/services/:id/branch',
    summary: 'Track another branch, and deploy its head',
    description:
      'The branch is read and its build decided first: a branch that is not there, or cannot build, is a 400 and nothing ' +
      'changes. Then the app tracks it (pushes to it deploy, when deploy-on-push is on) and its head is deployed.',
    scope: 'apps:deploy',
    readOnly: false,
    idempotent: false,
    params: idParams,
    body: z.strictObject({ branch: branchName.describe('The branch to deploy and follow') }),
    resource: writeService,
    output: deploymentView,
    errors: ['source_has_no_branches', 'git_branch_not_found', 'git_repository_not_found', 'git_url_refused', 'git_clone_failed', ...refusals],
    async handler({ body }, { authorization, transaction }) {
      const { service, app } = authorizedRecord(authorization, serviceKind).record;
      const source = sourceOf(app);
      if (source.kind === 'template') throw new ApiError('source_has_no_branches', 'The app deploys from a template, which has no branches', { param: 'branch' });
      const next = { ...source, branch: body.branch };
      const decided = await decideFromSource(sources, app.organizationId, next, {
        ...(app.rootDir !== null ? { rootDir: app.rootDir } : {}),
        ...(app.startCommand !== null ? { startCommand: app.startCommand } : {}),
      });
      const deployment = await queueDeployment(transaction, service, source.kind === 'githost' ? decided.commit : null, (tx) =>
        store.updateSource(tx, app.id, { branch: body.branch }, clock()),
      );
      return toDeploymentView(deployment);
    },
  });

  const deployOnPush = defineOperation({
    name: 'services.deploy_on_push',
    method: 'POST',
    path: '/services/:id/deploy-on-push',
    summary: 'Turn deploying on every push to the tracked branch on or off',
    description: 'Only a git-host app hears of pushes: turning it on for a git URL or a template is a 400.',
    scope: 'apps:deploy',
    readOnly: false,
    idempotent: true,
    params: idParams,
    body: z.strictObject({ enabled: z.boolean().describe('Whether a push to the tracked branch deploys it') }),
    resource: writeService,
    output: deployOnPushView,
    async handler({ body }, { authorization, transaction }) {
      const { service, app } = authorizedRecord(authorization, serviceKind).record;
      if (body.enabled && app.sourceKind !== 'githost') {
        throw new ApiError('invalid_parameter', 'Only an app of the git host hears of pushes; redeploy a git URL or template app instead', { param: 'enabled' });
      }
      const updated = await transaction((tx) => store.updateSource(tx, app.id, { deployOnPush: body.enabled }, clock()));
      return { object: 'service' as const, id: service.id, deployOnPush: updated?.deployOnPush ?? body.enabled };
    },
  });

  const cancel = defineOperation({
    name: 'services.deploy_cancel',
    method: 'POST',
    path: '/services/:id/deploy/cancel',
    summary: 'Cancel the service’s queued and building deployments',
    description:
      'Each is marked cancelled; one running is stopped where it is (a checkout or build is killed with its process group). ' +
      'A deployment already starting (its health check running) is not cancelled. The live version keeps serving. ' +
      '409 nothing_to_cancel when none is queued or building.',
    scope: 'apps:deploy',
    readOnly: false,
    idempotent: false,
    params: idParams,
    resource: writeService,
    output: cancelView,
    errors: ['nothing_to_cancel'],
    async handler(_input, { authorization }) {
      const { service } = authorizedRecord(authorization, serviceKind).record;
      const cancelled = await store.cancelPending(service.id, clock());
      if (cancelled.length === 0) throw new ApiError('nothing_to_cancel', 'The service has no queued or building deployment');
      await Promise.all(cancelled.map((deployment) => deps.cancels.publish(deployment.id)));
      return { object: 'list' as const, data: cancelled.map(toDeploymentView) };
    },
  });

  const decideAgain = defineOperation({
    name: 'services.build_decide',
    method: 'POST',
    path: '/services/:id/build',
    summary: 'Decide the service’s build again from its tracked branch’s head, with the reasons',
    description:
      'Reads the branch as a deploy would (a URL is cloned) and answers the decision with envKeys and missingEnv, or the 400 a ' +
      'deploy would get. Nothing is deployed or stored: GET /services/{id}/build keeps answering what the last deploy used.',
    scope: 'apps:deploy',
    readOnly: false,
    idempotent: true,
    params: idParams,
    resource: writeService,
    output: freshDecisionView,
    errors: ['git_branch_not_found', 'git_repository_not_found', 'git_url_refused', 'git_clone_failed', ...refusals],
    async handler(_input, { authorization }) {
      const { service, app } = authorizedRecord(authorization, serviceKind).record;
      const source = sourceOf(app);
      const { commit, decision } = await decideFromSource(sources, app.organizationId, source, {
        ...(app.rootDir !== null ? { rootDir: app.rootDir } : {}),
        ...(app.startCommand !== null ? { startCommand: app.startCommand } : {}),
      });
      const missing = missingEnv(decision.envKeys, { caller: [], stored: await deps.env.names(service.id), serviceProvided: ['PORT'] }) ?? [];
      return {
        object: 'build_decision' as const,
        serviceId: service.id,
        commit,
        decision: decision as unknown as Record<string, unknown>,
        envKeys: [...decision.envKeys],
        missingEnv: [...missing],
      };
    },
  });

  return [createFromUrl, launchTemplate, redeploy, branches, changeBranch, deployOnPush, cancel, decideAgain];
}
