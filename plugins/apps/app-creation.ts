import { randomBytes, randomUUID } from 'node:crypto';
import type { JobQueue } from '../../core/jobs/job-queue.ts';
import { ApiError } from '../../core/kernel/errors.ts';
import type { Transaction } from '../../core/ports/database.ts';
import type { EventActor } from '../../core/ports/events.ts';
import type { AppKeys } from '../keys/app-keys.ts';
import { type AppEnv, assertEnvVars } from './app-env.ts';
import { AppNameTaken, type AppsStore, type NewApp } from './apps-store.ts';
import { toAppView, toDeploymentView, toServiceView } from './apps-views.ts';
import type { BuildDecision } from './build-decision/index.ts';
import { enqueueDeployment } from './deploy-pipeline.ts';

export interface AppCreationDeps {
  store: AppsStore;
  env: AppEnv;
  appKeys: AppKeys;
  jobs: JobQueue;
  clock: () => Date;
  urlOf: (slug: string) => string;
}

/** What every deploy route (git host, URL, template) stores once the build is decided. */
export interface NewAppRequest {
  app: Omit<NewApp, 'id' | 'slug'>;
  env: Readonly<Record<string, string>>;
  /** The revision decided on (commit, or a template's hash); the create deployment's idempotency key. */
  commit: string;
  decision: BuildDecision;
  /** Who asked: the app's key is made in their name. */
  actor: EventActor | null;
}

/** 409 app_name_taken when the organisation has an app of that name (before anything is created). */
export async function assertNameFree(store: AppsStore, organizationId: string, name: string): Promise<void> {
  if ((await store.apps(organizationId, null)).some((app) => app.name === name)) {
    throw new ApiError('app_name_taken', `The organisation has an app named ${name} already`, { param: 'name' });
  }
}

/** The app's address: its name when free on the service, else the name with a random suffix. */
async function freeSlug(store: AppsStore, name: string): Promise<string> {
  const taken = (await store.routes()).map((entry) => entry.app.slug);
  if (!taken.includes(name)) return name;
  return `${name.slice(0, 40)}-${randomBytes(3).toString('hex')}`;
}

/**
 * Creates the app, its web service, its env (sealed in the vault), its own gateway key (`SVC_API_KEY`,
 * in the app's project) and the queued create deployment with its build job, in one transaction: the
 * 202 every deploy route answers. Variables the service sets itself are refused before anything is made.
 */
export async function createAppWithDeployment(deps: AppCreationDeps, transaction: <T>(fn: (tx: Transaction) => Promise<T>) => Promise<T>, request: NewAppRequest) {
  const { store, env, jobs, clock } = deps;
  assertEnvVars(request.env);
  const slug = await freeSlug(store, request.app.name);
  const appId = randomUUID();
  const serviceId = randomUUID();
  const answer = await transaction(async (tx) => {
    const now = clock();
    const created = await store.createApp(tx, { ...request.app, id: appId, slug }, serviceId, now).catch((error) => {
      if (error instanceof AppNameTaken) throw new ApiError('app_name_taken', `The organisation has an app named ${request.app.name} already`, { param: 'name' });
      throw error;
    });
    await env.write(tx, serviceId, request.env);
    const { organizationId, projectId, name } = request.app;
    const appKey = await deps.appKeys.create(tx, { organizationId, projectId, appId, name: `app ${name}`, actor: request.actor });
    await env.putGatewayKey(tx, serviceId, { keyId: appKey.key.id, token: appKey.token });
    const { deployment } = await store.createDeployment(
      tx,
      {
        id: randomUUID(),
        serviceId,
        organizationId: request.app.organizationId,
        commitSha: request.commit,
        reason: 'create',
        rollbackOf: null,
        decision: request.decision as unknown as Record<string, unknown>,
        idempotencyKey: `${serviceId}:${request.commit}`,
      },
      now,
    );
    await enqueueDeployment(jobs, tx, deployment.id);
    return { ...created, deployment };
  });
  const url = deps.urlOf(slug);
  const service = toServiceView(answer.service, url, 'deploying');
  return { object: 'app_deploy' as const, app: toAppView(answer.app, url, [service]), service, deployment: toDeploymentView(answer.deployment) };
}
