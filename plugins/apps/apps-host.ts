import type { AddressInfo } from 'node:net';
import path from 'node:path';
import type { PubSub } from '../../core/ports/coordination.ts';
import { ApiError } from '../../core/kernel/errors.ts';
import type { AppsStore } from './apps-store.ts';
import type { AppsConfig } from './apps-config.ts';
import { type AppRoute, publishRoute, publishRouteRemoval, type RouteSource, type RunningAppsProxy } from './proxy/index.ts';
import type { HostingBilling } from './hosting-billing.ts';
import type { HostingMeter } from './hosting-meter.ts';
import type { SecretVault } from '../../core/services/secret-vault.ts';
import { ConfigError } from '../../config/load.ts';
import { ArtifactUrls } from './runtime/artifact-urls.ts';
import { LocalRuntime, type RouteChange, RuntimeError, type RuntimePort } from './runtime/index.ts';
import { resolveSandboxTools, type SandboxTools } from './runtime/sandbox.ts';

/** Where the local runtime keeps its state and logs (also what `secrets rotate` looks at). */
export function runtimeStateDir(config: Pick<AppsConfig, 'runtime'>, dataDir: string): string {
  return path.resolve(config.runtime.stateDir ?? path.join(dataDir, 'apps', 'runtime'));
}

/** What the host holds of either provider: the port, the build sandbox, and its own start and end. */
type HostedRuntime = RuntimePort & {
  tools: SandboxTools;
  close(): Promise<void>;
  restoreAll(): Promise<{ failed: Array<{ serviceId: string; error: Error }> }>;
};

/**
 * The apps plugin's hold on the runtime and the routes. The runtime lives in the process that runs
 * the plugin's jobs and operations (role `all`; see README: replicas); it is made in the plugin's
 * start, so operations built before it reach it through `runtime()`. Every switch the runtime makes
 * (`onChange`) is written to the service's row (what the proxies reload from) and published to every
 * replica's proxy, in the order they happened.
 */
export class AppsHost implements RouteSource {
  private current: HostedRuntime | null = null;
  private urls: Promise<ArtifactUrls | null> | null = null;
  /** The apps proxy, in the processes that serve HTTP. */
  proxy: RunningAppsProxy | null = null;
  /** Hosting money, set when the plugin's periodic jobs are made; null without the metering plugin. */
  billing: HostingBilling | null = null;
  /** Where this process's HTTP server listens (its routes set it): apps reach the gateway there. */
  serviceAddress: (() => AddressInfo | string | null) | null = null;
  private publishing: Promise<void> = Promise.resolve();

  constructor(
    private readonly deps: {
      store: AppsStore;
      pubsub: PubSub;
      config: AppsConfig;
      dataDir: string;
      vault: SecretVault;
      now: () => Date;
      /** `server.publicUrl`: the artifact URLs' default base. */
      publicUrl: string | undefined;
      warn: (message: string) => void;
      error: (details: object, message: string) => void;
      /** Records the runtime's instances as runs (hosting money). */
      meter: HostingMeter;
    },
  ) {}

  get buildDir(): string {
    return path.resolve(this.deps.config.build.dir ?? path.join(this.deps.dataDir, 'apps'));
  }

  get stateDir(): string {
    return runtimeStateDir(this.deps.config, this.deps.dataDir);
  }

  /** Makes the runtime, follows its switches, and restores what should run (the artifacts of the live deployments). */
  async start(): Promise<void> {
    const settings = this.deps.config.runtime;
    const warn = (message: string) => this.deps.warn(`apps runtime: ${message}`);
    let runtime: HostedRuntime;
    if (settings.provider === 'kubernetes' && settings.kubernetes) {
      const kube = settings.kubernetes;
      // The apps run in pods; the builds still run here, in this machine's sandbox.
      const tools = await resolveSandboxTools({ bwrapPath: settings.bwrapPath, requireSandbox: settings.requireSandbox, warn });
      const urls = (await this.artifactUrls())!;
      // Loaded only here: the Kubernetes client alone adds about 70 MiB to every process that imports it.
      const { KubernetesRuntime } = await import('./runtime/kubernetes-runtime.ts');
      runtime = KubernetesRuntime.fromFile(kube.kubeconfig, {
        namespace: kube.namespace,
        baseImage: kube.baseImage,
        fetchImage: kube.fetchImage,
        containerPort: kube.containerPort,
        clusterDomain: kube.clusterDomain,
        artifactUrl: async (deploymentId) => urls.sign(deploymentId),
        rolloutTimeoutMs: kube.rolloutTimeoutMs,
        pollMs: kube.pollMs,
        limits: settings.limits,
        tools,
        now: this.deps.now,
        warn,
      });
    } else {
      runtime = await LocalRuntime.create({
        stateDir: this.stateDir,
        sealer: this.deps.vault,
        ports: settings.ports,
        requireSandbox: settings.requireSandbox,
        bwrapPath: settings.bwrapPath,
        healthTimeoutMs: settings.healthTimeoutMs,
        stopGraceMs: settings.stopGraceMs,
        limits: settings.limits,
        warn,
      });
    }
    runtime.onChange((change) => this.follow(change));
    // Runs a previous host left open end at their last heartbeat, before this host starts any instance.
    await this.deps.meter.closeAbandoned();
    runtime.onEvent((event) => this.deps.meter.record(event));
    this.deps.meter.startHeartbeat();
    this.current = runtime;
    // Restoring waits for each app's health gate: the boot does not wait for it.
    void runtime.restoreAll().then(
      ({ failed }) => {
        for (const { serviceId, error } of failed) this.deps.error({ serviceId, err: error.message }, 'apps: restoring a service failed');
      },
      (error: unknown) => this.deps.error({ err: error instanceof Error ? error.message : String(error) }, 'apps: restoring the services failed'),
    );
  }

  /**
   * The signer of artifact URLs under the `kubernetes` provider (its key in the secret vault), null
   * under `local`: what the artifact route checks in every process that serves HTTP.
   */
  artifactUrls(): Promise<ArtifactUrls | null> {
    const settings = this.deps.config.runtime;
    if (settings.provider !== 'kubernetes' || !settings.kubernetes) return Promise.resolve(null);
    const base = settings.kubernetes.artifactUrlBase ?? this.deps.publicUrl;
    if (!base) {
      throw new ConfigError('config: plugins.apps: runtime.provider kubernetes needs runtime.kubernetes.artifactUrlBase (or server.publicUrl): the URL the cluster fetches artifacts from');
    }
    const options = { base, ttlMs: settings.kubernetes.artifactUrlTtlMs, now: this.deps.now };
    this.urls ??= ArtifactUrls.fromVault(this.deps.vault, options).catch((error: unknown) => {
      this.urls = null;
      throw error;
    });
    return this.urls;
  }

  async stop(): Promise<void> {
    const runtime = this.current;
    this.current = null;
    await runtime?.close();
    await this.deps.meter.stop();
    await this.publishing;
  }

  /**
   * Stops a service, as POST /services/{id}/stop and the zero-balance rule do: it stays stopped
   * (desired), its instances end (a service the runtime never ran here has none), its route is gone.
   */
  async stopService(serviceId: string): Promise<void> {
    await this.deps.store.setDesired(serviceId, 'stopped');
    try {
      await this.runtime().stop(serviceId);
    } catch (error) {
      if (!(error instanceof RuntimeError && error.code === 'unknown_service')) throw error;
    }
    await this.settled();
  }

  /** The runtime, or a 503 in a process that runs none (a worker-less API replica). */
  runtime(): RuntimePort & { tools: SandboxTools } {
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
