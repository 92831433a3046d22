import path from 'node:path';
import type { PubSub } from '../../core/ports/coordination.ts';
import { ApiError } from '../../core/kernel/errors.ts';
import type { AppsStore } from './apps-store.ts';
import { BuildLogFiles } from './build-log.ts';
import type { AppsConfig } from './apps-config.ts';
import { type AppRoute, publishRoute, publishRouteRemoval, type RouteSource, type RunningAppsProxy } from './proxy/index.ts';
import { LocalRuntime, type RouteChange, type RuntimePort } from './runtime/index.ts';

/**
 * The apps plugin's hold on the runtime and the routes. The runtime lives in the process that runs
 * the plugin's jobs and operations (role `all`; see README: replicas); it is made in the plugin's
 * start, so operations built before it reach it through `runtime()`. Every switch the runtime makes
 * (`onChange`) is written to the service's row (what the proxies reload from) and published to every
 * replica's proxy, in the order they happened.
 */
export class AppsHost implements RouteSource {
  private current: LocalRuntime | null = null;
  /** The apps proxy, in the processes that serve HTTP. */
  proxy: RunningAppsProxy | null = null;
  private publishing: Promise<void> = Promise.resolve();

  constructor(
    private readonly deps: {
      store: AppsStore;
      pubsub: PubSub;
      config: AppsConfig;
      dataDir: string;
      warn: (message: string) => void;
      error: (details: object, message: string) => void;
    },
  ) {}

  get buildDir(): string {
    return path.resolve(this.deps.config.build.dir ?? path.join(this.deps.dataDir, 'apps'));
  }

  /** Running builds' logs (build-log.ts): read by the API while the deployment runs. */
  get buildLogs(): BuildLogFiles {
    return new BuildLogFiles(path.join(this.buildDir, 'logs'));
  }

  get stateDir(): string {
    return path.resolve(this.deps.config.runtime.stateDir ?? path.join(this.deps.dataDir, 'apps', 'runtime'));
  }

  /** Makes the runtime, follows its switches, and restores what should run (the artifacts of the live deployments). */
  async start(): Promise<void> {
    const settings = this.deps.config.runtime;
    const runtime = await LocalRuntime.create({
      stateDir: this.stateDir,
      ports: settings.ports,
      requireSandbox: settings.requireSandbox,
      bwrapPath: settings.bwrapPath,
      healthTimeoutMs: settings.healthTimeoutMs,
      stopGraceMs: settings.stopGraceMs,
      limits: settings.limits,
      warn: (message) => this.deps.warn(`apps runtime: ${message}`),
    });
    runtime.onChange((change) => this.follow(change));
    this.current = runtime;
    // Restoring waits for each app's health gate: the boot does not wait for it.
    void runtime.restoreAll().then(({ failed }) => {
      for (const { serviceId, error } of failed) this.deps.error({ serviceId, err: error.message }, 'apps: restoring a service failed');
    });
  }

  async stop(): Promise<void> {
    const runtime = this.current;
    this.current = null;
    await runtime?.close();
    await this.publishing;
  }

  /** The runtime, or a 503 in a process that runs none (a worker-less API replica). */
  runtime(): RuntimePort & { tools: LocalRuntime['tools'] } {
    if (!this.current) throw new ApiError('runtime_unavailable_here');
    return this.current;
  }

  get running(): boolean {
    return this.current !== null;
  }

  async loadRoutes(): Promise<readonly AppRoute[]> {
    return (await this.deps.store.routes()).map(({ app, service }) => ({
      slug: app.slug,
      organizationId: app.organizationId,
      appId: app.id,
      serviceId: service.id,
      deploymentId: service.routeDeploymentId,
      target: service.routeTarget,
      revision: service.routeRevision,
    }));
  }

  /** Removes a deleted app's host from every proxy. */
  async removeRoute(slug: string): Promise<void> {
    await publishRouteRemoval(this.deps.pubsub, slug, Date.now() + 1);
  }

  /** Resolves once every switch seen so far is written and published (tests, deletes). */
  settled(): Promise<void> {
    return this.publishing;
  }

  private follow(change: RouteChange): void {
    this.publishing = this.publishing.then(async () => {
      try {
        const revision = await this.deps.store.setRoute(change.serviceId, change.deploymentId, change.target);
        if (revision === null) return;
        const service = await this.deps.store.serviceById(change.serviceId);
        const app = service ? await this.deps.store.appById(service.appId) : null;
        if (!service || !app) return;
        await publishRoute(this.deps.pubsub, {
          slug: app.slug,
          organizationId: app.organizationId,
          appId: app.id,
          serviceId: service.id,
          deploymentId: change.deploymentId,
          target: change.target,
          revision,
        });
      } catch (error) {
        this.deps.error({ err: error instanceof Error ? error.message : String(error), serviceId: change.serviceId }, 'apps: recording a route change failed');
      }
    });
  }
}
