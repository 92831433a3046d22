import { rm } from 'node:fs/promises';
import { Tokens } from '../../core/kernel/di-tokens.ts';
import { createToken } from '../../core/kernel/container.ts';
import { definePlugin, type PluginContext } from '../../core/kernel/plugin.ts';
import { OrganizationErasersPoint } from '../../core/kernel/organization-erasure.ts';
import { GitHostTokens } from '../githost/git-host.ts';
import { AppEnv } from './app-env.ts';
import { type AppsConfig, appsConfigSchema } from './apps-config.ts';
import { AppsHost } from './apps-host.ts';
import { appsMigrations } from './apps-migrations.ts';
import { appsOperations, serviceRecordKind } from './apps-operations.ts';
import { logOperations } from './log-operations.ts';
import { AppsStore } from './apps-store.ts';
import { buildHandler } from './deploy-pipeline.ts';
import { appRequestsEraser, appsProxyMigrations, servesAppsProxy, startAppsProxy } from './proxy/index.ts';
import { pushDeploySubscriber } from './push-deploys.ts';
import './apps-errors.ts';

/** What other code (tests, the CLI) may reach of the plugin. */
export const AppsTokens = {
  Host: createToken<AppsHost>('apps.Host'),
  Store: createToken<AppsStore>('apps.Store'),
};

function parts(ctx: PluginContext<AppsConfig>) {
  const { container } = ctx;
  return {
    store: container.resolve(AppsTokens.Store),
    host: container.resolve(AppsTokens.Host),
    git: container.resolve(GitHostTokens.Host),
    env: new AppEnv(container.resolve(Tokens.Secrets)),
    jobs: container.resolve(Tokens.Jobs),
    blobs: container.resolve(Tokens.Blobs),
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
  migrations: [...appsProxyMigrations, ...appsMigrations],
  register(ctx) {
    const { container, config, appConfig, extensions, logger } = ctx;
    const database = container.resolve(Tokens.Database);
    const store = new AppsStore(database);
    const host = new AppsHost({
      store,
      pubsub: container.resolve(Tokens.Coordination).pubsub,
      config,
      dataDir: appConfig.storage.dataDir,
      warn: (message) => logger.warn(message),
      error: (details, message) => logger.error(details, message),
    });
    container.bindValue(AppsTokens.Store, store);
    container.bindValue(AppsTokens.Host, host);
    const env = new AppEnv(container.resolve(Tokens.Secrets));
    extensions.contribute(OrganizationErasersPoint, appRequestsEraser);
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
    const { store, host, git, env, jobs, blobs, clock } = parts(ctx);
    const logs = logOperations({ host, serviceKind: serviceRecordKind(store) });
    return [
      ...logs,
      ...appsOperations({
        store,
        host,
        git,
        env,
        jobs,
        blobs,
        clock,
        identity: ctx.container.resolve(Tokens.Identity),
        database: ctx.container.resolve(Tokens.Database),
        urlOf: (slug) => urlOf(ctx.config, host, slug),
      }),
    ];
  },
  queues: (ctx) => {
    const { store, host, git, env, blobs, clock } = parts(ctx);
    const allowPrivateNetwork = ctx.appConfig.outbound.allowPrivateNetwork;
    const handler = buildHandler({ store, host, git, env, blobs, clock, config: ctx.config, allowPrivateNetwork });
    return [{ ...handler, spec: { ...handler.spec, concurrency: ctx.config.build.concurrency } }];
  },
  subscribers: (ctx) => {
    const { store, jobs, clock } = parts(ctx);
    return [pushDeploySubscriber({ store, jobs, clock })];
  },
  async start(ctx) {
    const { container, config, appConfig, logger } = ctx;
    const host = container.resolve(AppsTokens.Host);
    // The local runtime runs where the deploy jobs run; an API-only replica reaches none (README: replicas).
    if (appConfig.server.role !== 'api') await host.start();
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
    await host.stop();
  },
});
