import { z } from 'zod';
import type { AppRecord, DeploymentRecord, ServiceRecord } from './apps-store.ts';

/** Why a deployment failed (the `failureCode` of a deployment). */
export const FAILURE_CODES = [
  'build_timeout',
  'build_memory',
  'build_failed',
  'checkout_failed',
  'build_refused',
  'health_check_failed',
  'runtime_refused',
  'release_failed',
  'deploy_failed',
] as const;
export type FailureCode = (typeof FAILURE_CODES)[number];

const timingsView = z
  .object({
    clone: z.number().nullable().describe('ms reading the commit out of the repository; null when not run'),
    build: z.number().nullable().describe('ms deciding, installing and building; null when not run (a rollback)'),
    deploy: z.number().nullable().describe('ms from starting the app to its health check passing; null when not run'),
  })
  .nullable()
  .describe('Per-phase time; null for a deploy nothing measured yet');

export const deploymentView = z
  .object({
    object: z.literal('deployment'),
    id: z.string(),
    serviceId: z.string(),
    commit: z.string().nullable().describe('The commit built (40 hex)'),
    reason: z.enum(['create', 'push', 'redeploy', 'rollback']),
    rollbackOf: z.string().nullable().describe('For a rollback: the deployment whose build it runs again'),
    status: z.enum(['queued', 'cloning', 'building', 'starting', 'live', 'failed', 'cancelled', 'retired']),
    failureReason: z.string().nullable().describe('What went wrong, worded for the person deploying'),
    failureCode: z
      .enum(FAILURE_CODES)
      .nullable()
      .describe(
        'Why it failed: build_timeout (install and build ran past the build time limit), build_memory (an allocation failed under the ' +
          'build memory cap), build_failed (a step exited non-zero; the log says why, e.g. a refused registry CONNECT), ' +
          'checkout_failed, build_refused (the build decision refused), health_check_failed, runtime_refused, deploy_failed',
      ),
    timings: timingsView,
    imageSizeBytes: z.number().nullable().describe('Size of the built artifact'),
    createdAt: z.string(),
    startedAt: z.string().nullable(),
    finishedAt: z.string().nullable(),
  })
  .meta({ id: 'Deployment', description: 'One deploy of a service: a commit built and started' });

export const serviceView = z
  .object({
    object: z.literal('service'),
    id: z.string().describe('The SERVICE id: what /client/services/{id}/… take'),
    appId: z.string(),
    kind: z.literal('web'),
    url: z.string().describe('Where the app answers'),
    state: z.enum(['deploying', 'starting', 'running', 'crashed', 'stopped', 'failed']),
    liveDeploymentId: z.string().nullable(),
  })
  .meta({ id: 'AppService', description: 'A service of an app: its address and state' });

export const appView = z
  .object({
    object: z.literal('app'),
    id: z.string().describe('The APP id: what /client/apps/{id} takes'),
    projectId: z.string(),
    name: z.string(),
    slug: z.string().describe('The host label: <slug>.<baseDomain>'),
    url: z.string().describe('The live URL'),
    status: z.string().describe('deploying, live or failed'),
    source: z.object({
      kind: z.enum(['githost', 'url', 'template']).describe('githost: a repository of the git host; url: a git URL; template: a template of this service'),
      repo: z.string().nullable().describe('githost: the repository; template: the template id'),
      url: z.string().nullable().describe('url: the git URL cloned at each deploy'),
      branch: z.string(),
      rootDir: z.string().nullable(),
    }),
    startCommand: z.string().nullable(),
    deployOnPush: z.boolean(),
    cell: z.string(),
    services: z.array(serviceView),
    createdAt: z.string(),
  })
  .meta({ id: 'App', description: 'A hosted app, its live URL and services' });

export const appListView = z.object({ object: z.literal('list'), data: z.array(appView) }).meta({ id: 'AppList', description: 'Apps, newest first' });

export const deployAnswerView = z
  .object({ object: z.literal('app_deploy'), app: appView, service: serviceView, deployment: deploymentView })
  .meta({ id: 'AppDeployAccepted', description: 'The app, its web service and the queued deployment (poll /apps/{id}/progress)' });

export type ServiceState = z.output<typeof serviceView>['state'];

export function toDeploymentView(deployment: DeploymentRecord): z.output<typeof deploymentView> {
  return {
    object: 'deployment',
    id: deployment.id,
    serviceId: deployment.serviceId,
    commit: deployment.commitSha,
    reason: deployment.reason,
    rollbackOf: deployment.rollbackOf,
    status: deployment.status,
    failureReason: deployment.failureReason,
    failureCode: (deployment.failureCode as (typeof FAILURE_CODES)[number] | null) ?? null,
    timings: deployment.timings,
    imageSizeBytes: deployment.imageSizeBytes,
    createdAt: deployment.createdAt.toISOString(),
    startedAt: deployment.startedAt?.toISOString() ?? null,
    finishedAt: deployment.finishedAt?.toISOString() ?? null,
  };
}

export function toServiceView(service: ServiceRecord, url: string, state: ServiceState): z.output<typeof serviceView> {
  return { object: 'service', id: service.id, appId: service.appId, kind: 'web', url, state, liveDeploymentId: service.routeDeploymentId };
}

export function toAppView(app: AppRecord, url: string, services: z.output<typeof serviceView>[]): z.output<typeof appView> {
  return {
    object: 'app',
    id: app.id,
    projectId: app.projectId,
    name: app.name,
    slug: app.slug,
    url,
    status: app.status,
    source: { kind: app.sourceKind, repo: app.sourceRepo, url: app.sourceUrl, branch: app.branch, rootDir: app.rootDir },
    startCommand: app.startCommand,
    deployOnPush: app.deployOnPush,
    cell: app.cell,
    services,
    createdAt: app.createdAt.toISOString(),
  };
}
