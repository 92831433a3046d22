import { rm } from 'node:fs/promises';
import { Tokens } from '../../core/kernel/di-tokens.ts';
import { createToken } from '../../core/kernel/container.ts';
import { definePlugin, type PluginContext } from '../../core/kernel/plugin.ts';
import { definePeriodic } from '../../core/jobs/queue-definitions.ts';
import { OrganizationErasersPoint } from '../../core/kernel/organization-erasure.ts';
import { GitHostRepoUsersPoint, GitHostTokens } from '../githost/git-host.ts';
import { AppKeys } from '../keys/app-keys.ts';
import { CreditChargesPoint } from '../../core/ports/metering.ts';
import { usdToMicros } from '../../core/vocabulary/money.ts';
import { AppEnv, RuntimeEnv } from './app-env.ts';
import { type AppsConfig, appsConfigSchema } from './apps-config.ts';
import { AppsHost } from './apps-host.ts';
import { appsMigrations } from './apps-migrations.ts';
import { analysisOperations } from './analysis-operations.ts';
import { appsOperations, serviceRecordKind } from './apps-operations.ts';
import { logOperations } from './log-operations.ts';
import { deployOperations } from './deploy-operations.ts';
import { envOperations } from './env-operations.ts';
import { previewOperations } from './preview-operations.ts';
import { type AppRecord, AppsStore } from './apps-store.ts';
import type { Transaction } from '../../core/ports/database.ts';
import { DeployCancels } from './deploy-cancels.ts';
import { appsRepoUsers } from './githost-repo-users.ts';
import { buildHandler } from './deploy-pipeline.ts';
import { HostingBilling } from './hosting-billing.ts';
import { hostingMailSubscriber } from './hosting-events.ts';
import { HostingMeter } from './hosting-meter.ts';
import { hostingMigrations } from './hosting-migrations.ts';
import { HostingPrices } from './hosting-prices.ts';
import { priceTiersOf } from './hosting-price.ts';
import { appRequestsEraser, appsProxyMigrations, servesAppsProxy, startAppsProxy } from './proxy/index.ts';
import { pushDeploySubscriber } from './push-deploys.ts';
import { AppRequestStore } from './traffic/request-store.ts';
import { trafficOperations } from './traffic/traffic-operations.ts';
import { sampleUsage, UsageSampleStore, usageMigrations, usageSamplesEraser } from './traffic/usage-samples.ts';
import { upkeepMigrations, upkeepParts } from './upkeep/index.ts';
import { mountArtifactRoute } from './runtime/artifact-route.ts';
import './apps-errors.ts';

/** What other code (tests, the CLI) may reach of the plugin. */
export const AppsTokens = {
  Host: createToken<AppsHost>('apps.Host'),
  Store: createToken<AppsStore>('apps.Store'),
  Cancels: createToken<DeployCancels>('apps.Cancels'),
  Meter: createToken<HostingMeter>('apps.HostingMeter'),
};

/**
 * Where apps reach the gateway (SVC_BASE_URL, SVC_MCP_URL): `server.publicUrl`, else the loopback port
 * this process listens on (the configured one until it listens: port 0 means a port chosen at listen).
 */
function gatewayUrlOf(ctx: PluginContext<AppsConfig>): () => string {
  const { server } = ctx.appConfig;
  return () => {
    if (server.publicUrl) return server.publicUrl;
    const address = ctx.container.resolve(AppsTokens.Host).serviceAddress?.();
    const port = address && typeof address === 'object' ? address.port : server.port;
    return `http://127.0.0.1:${port}`;
  };
}

/** Hosting money (README.md): null without the metering plugin (nothing is charged, no balance to act on). */
function hostingBilling(ctx: PluginContext<AppsConfig>): HostingBilling | null {
  const charges = ctx.extensions.get(CreditChargesPoint);
  if (!charges) return null;
  const { container, config } = ctx;
  const host = container.resolve(AppsTokens.Host);
  return new HostingBilling({
    db: container.resolve(Tokens.Database),
    charges,
    events: container.resolve(Tokens.Events),
    prices: new HostingPrices(config.hosting.prices),
    clock: container.resolve(Tokens.Clock),
    stopService: (serviceId) => host.stopService(serviceId),
    settings: {
      baseFeeMicrosPerDay: usdToMicros(config.hosting.baseFeeUsdPerDay),
      closeDelayMs: config.hosting.closeDelayMinutes * 60_000,
      graceMs: Math.round(config.hosting.graceHours * 3_600_000),
    },
  });
}

function parts(ctx: PluginContext<AppsConfig>) {
  const { container } = ctx;
  const env = new AppEnv(container.resolve(Tokens.Secrets));
  return {
    store: container.resolve(AppsTokens.Store),
    host: container.resolve(AppsTokens.Host),
    git: container.resolve(GitHostTokens.Host),
    env,
    runtimeEnv: new RuntimeEnv(env, gatewayUrlOf(ctx)),
    appKeys: new AppKeys({
      identityFor: container.resolve(Tokens.IdentityFactory),
      events: container.resolve(Tokens.Events),
      authenticator: container.resolve(Tokens.Authenticator),
    }),
    sources: {
      git: container.resolve(GitHostTokens.Host),
      clone: container.resolve(GitHostTokens.Clone),
      remoteBranches: container.resolve(GitHostTokens.RemoteBranches),
    },
    cancels: container.resolve(AppsTokens.Cancels),
    jobs: container.resolve(Tokens.Jobs),
    blobs: container.resolve(Tokens.Blobs),
    jobLogs: container.resolve(Tokens.JobLogs),
    clock: container.resolve(Tokens.Clock),
  };
}

/** `http://<slug>.<baseDomain>:<port>`, the port the proxy listens on (its configured one before it does). */
function urlOf(config: AppsConfig, host: AppsHost, slug: string): string {
  return `http://${slug}.${config.proxy.baseDomain}:${host.proxy?.port ?? config.proxy.port}`;
}

/**
 * Apps from git (plugins/apps/README.md): deploy a repository of the git host, build it in the
 * sandbox on the `apps.build` queue, run it with the runtime, serve it through the apps proxy at
 * `<slug>.<baseDomain>`, and deploy again on every push to the branch it tracks.
 */
export const appsPlugin = definePlugin({
  name: 'apps',
  description: 'Apps deployed from git: builds, the app runtime and the apps proxy at <slug>.<baseDomain>',
  dependsOn: ['githost'],
  configSchema: appsConfigSchema,
  migrations: [...appsProxyMigrations, ...appsMigrations, ...usageMigrations, ...upkeepMigrations, ...hostingMigrations],
  register(ctx) {
    const { container, config, appConfig, extensions, logger } = ctx;
    const database = container.resolve(Tokens.Database);
    const store = new AppsStore(database);
    const meter = new HostingMeter({
      db: database,
      clock: container.resolve(Tokens.Clock),
      heartbeatMs: config.hosting.heartbeatSeconds * 1_000,
      error: (details, message) => logger.error(details, message),
    });
    container.bindValue(AppsTokens.Meter, meter);
    const host = new AppsHost({
      meter,
      store,
      pubsub: container.resolve(Tokens.Coordination).pubsub,
      config,
      dataDir: appConfig.storage.dataDir,
      vault: container.resolve(Tokens.Secrets),
      now: container.resolve(Tokens.Clock),
      publicUrl: appConfig.server.publicUrl,
      warn: (message) => logger.warn(message),
      error: (details, message) => logger.error(details, message),
    });
    container.bindValue(AppsTokens.Store, store);
    container.bindValue(AppsTokens.Host, host);
    container.bindValue(AppsTokens.Cancels, new DeployCancels(container.resolve(Tokens.Coordination).pubsub));
    const env = new AppEnv(container.resolve(Tokens.Secrets));
    extensions.contribute(OrganizationErasersPoint, appRequestsEraser);
    extensions.contribute(OrganizationErasersPoint, usageSamplesEraser);
    extensions.contribute(OrganizationErasersPoint, upkeepParts(ctx, { store, host }).eraser());
    extensions.contribute(OrganizationErasersPoint, {
      name: 'app hosting records',
      async erase(tx, organizationId) {
        let count = 0;
        for (const table of ['app_instance_runs', 'app_hosting_days', 'app_balance_notices']) {
          count += (await tx.query(`DELETE FROM ${table} WHERE organization_id = $1`, [organizationId])).rowCount;
        }
        return count;
      },
    });
    extensions.contribute(GitHostRepoUsersPoint, appsRepoUsers);
    extensions.contribute(OrganizationErasersPoint, {
      name: 'apps',
      async erase(tx, organizationId) {
        const { apps, services, artifacts, deployments } = await store.eraseOrganization(tx, organizationId);
        await env.forget(tx, services);
        // Instances and artifacts are no transaction's: they go once the deletion committed.
        tx.afterCommit(() => {
          void (async () => {
            if (host.running)
              for (const id of deployments)
                await host
                  .runtime()
                  .retire(id)
                  .catch(() => undefined);
            for (const app of apps) await host.removeRoute(app.slug).catch(() => undefined);
            for (const dir of artifacts) await rm(dir, { recursive: true, force: true });
          })();
        });
        return apps.length;
      },
    });
  },
  operations: (ctx) => {
    const { store, host, git, env, runtimeEnv, appKeys, jobs, blobs, jobLogs, clock, sources, cancels } = parts(ctx);
    const identity = ctx.container.resolve(Tokens.Identity);
    const database = ctx.container.resolve(Tokens.Database);
    const urlOfSlug = (slug: string) => urlOf(ctx.config, host, slug);
    const upkeep = upkeepParts(ctx, { store, host });
    const deps = {
      store,
      host,
      git,
      env,
      runtimeEnv,
      appKeys,
      jobs,
      blobs,
      jobLogs,
      clock,
      identity,
      database,
      urlOf: urlOfSlug,
      sources,
      cancels,
      onAppDelete: (tx: Transaction, app: AppRecord) => upkeep.onAppDelete(tx, app),
    };
    const traffic = trafficOperations({
      store,
      requests: new AppRequestStore(database),
      samples: new UsageSampleStore(database),
      identity,
      clock,
      prices: priceTiersOf(ctx.config.hosting.prices),
      sampleEveryMs: ctx.config.usage.sampleEveryMs,
    });
    const insight = { sources, memoryBytes: ctx.config.runtime.limits.memoryBytes, prices: new HostingPrices(ctx.config.hosting.prices) };
    const preview = { ...deps, hostOf: (slug: string) => `${slug}.${ctx.config.proxy.baseDomain}`, proxyPort: () => host.proxy?.port ?? null };
    return [
      ...logOperations({ host, serviceKind: serviceRecordKind(store) }),
      ...appsOperations(deps),
      ...deployOperations(deps),
      ...envOperations({ store, host, env, runtimeEnv, appKeys, identity, database }),
      ...analysisOperations(insight),
      ...previewOperations(preview),
      ...traffic,
      ...upkeep.operations(),
    ];
  },
  // The runtime's instances sampled (memory, CPU, running time) where the runtime runs; samples past
  // retention removed. Days are charged and balances checked by one replica; stopping needs the
  // runtime, which runs where jobs do.
  periodic: (ctx) => {
    const { host, clock } = parts(ctx);
    const samples = new UsageSampleStore(ctx.container.resolve(Tokens.Database));
    const retentionMs = ctx.config.usage.retentionDays * 86_400_000;
    const sampling = definePeriodic({
      name: 'apps.usage-sample',
      everyMs: ctx.config.usage.sampleEveryMs,
      async run() {
        if (host.running) await sampleUsage({ samples, clock, retentionMs }, host.runtime());
      },
    });
    const billing = hostingBilling(ctx);
    host.billing = billing;
    if (!billing) return [sampling];
    return [sampling, definePeriodic({ name: 'apps.hosting', everyMs: ctx.config.hosting.checkEveryMinutes * 60_000, run: () => billing.tick() })];
  },
  queues: (ctx) => {
    const { store, host, sources, cancels, runtimeEnv, blobs, jobLogs, clock } = parts(ctx);
    const upkeep = upkeepParts(ctx, { store, host });
    const allowPrivateNetwork = ctx.appConfig.outbound.allowPrivateNetwork;
    const hooks = upkeep.hooks();
    const pipeline = { store, host, sources, cancels, runtimeEnv, blobs, jobLogs, clock, hooks, allowPrivateNetwork };
    const handler = buildHandler({ ...pipeline, config: ctx.config });
    return [{ ...handler, spec: { ...handler.spec, concurrency: ctx.config.build.concurrency } }, upkeep.erasureQueue()];
  },
  routes(app, ctx) {
    ctx.container.resolve(AppsTokens.Host).serviceAddress = () => app.server.address();
    upkeepParts(ctx, parts(ctx)).routes(app);
    const host = ctx.container.resolve(AppsTokens.Host);
    const store = ctx.container.resolve(AppsTokens.Store);
    mountArtifactRoute(app, {
      urls: () => host.artifactUrls(),
      artifactDirOf: async (deploymentId) => (await store.deploymentById(deploymentId))?.artifactDir ?? null,
    });
  },
  subscribers: (ctx) => {
    const { store, jobs, clock } = parts(ctx);
    const mail = { identity: ctx.container.resolve(Tokens.Identity), mailer: ctx.container.resolve(Tokens.Mailer), logger: ctx.logger };
    return [pushDeploySubscriber({ store, jobs, clock }), hostingMailSubscriber(mail)];
  },
  async start(ctx) {
    const { container, config, appConfig, logger } = ctx;
    const host = container.resolve(AppsTokens.Host);
    // The local runtime runs where the deploy jobs run; an API-only replica reaches none (README: replicas).
    if (appConfig.server.role !== 'api') {
      await host.start();
      await container.resolve(AppsTokens.Cancels).listen();
    }
    if (servesAppsProxy(appConfig)) {
      host.proxy = await startAppsProxy({
        config: config.proxy,
        database: container.resolve(Tokens.Database),
        pubsub: container.resolve(Tokens.Coordination).pubsub,
        source: host,
        metrics: container.resolve(Tokens.Metrics),
        logger: { warn: (details, message) => logger.warn(details, message), error: (details, message) => logger.error(details, message) },
      });
    }
  },
  async stop(ctx) {
    const host = ctx.container.resolve(AppsTokens.Host);
    await host.proxy?.stop(1_000);
    host.proxy = null;
    await ctx.container.resolve(AppsTokens.Cancels).close();
    await host.stop();
  },
});
