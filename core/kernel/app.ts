import { shareWorkerMetrics, workerMetrics } from './worker-processes.ts';
import '../http/fastify-types.ts';
import type { LookupFunction } from 'node:net';
import { availableParallelism } from 'node:os';
import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import type { AppConfig } from '../../config/schema.ts';
import { Authenticator } from '../identity/authenticator.ts';
import { bootstrapFirstOrganization, type BootstrapResult } from './bootstrap.ts';
import { Container } from './container.ts';
import { ExtensionRegistry } from './extension-points.ts';
import { installAuthHook } from '../http/auth-hook.ts';
import { mountAuthRoutes } from '../http/auth-routes.ts';
import { PeopleSignIn } from '../identity/people-sign-in.ts';
import { type DeriveKey, PasswordHasher } from '../identity/passwords.ts';
import { authorizationHeader } from '../http/authorization-header.ts';
import { clientErrorHandler, refuseConnect } from '../http/client-errors.ts';
import { installDraining } from '../http/draining.ts';
import { installBrowserCors } from '../http/browser-cors.ts';
import { installV1ResponseMetrics } from '../http/v1-response-metrics.ts';
import { collectV1Routes, installRateLimitHeaders, type V1Route } from '../http/v1-surface.ts';
import { installRouteResources } from '../http/route-resources.ts';
import { InferenceAdmissionPoint } from '../gateway/inference-admission.ts';
import { frameworkErrorHandler, installErrorHandling } from '../http/error-handler.ts';
import { installJsonBodyParser } from '../http/json-body-parser.ts';
import { installPublicBodyLimit } from '../http/public-body-limit.ts';
import { MANAGEMENT_PREFIXES, mountOperations } from '../http/mount-operations.ts';
import { publicOriginOf } from '../http/request-origin.ts';
import { buildOpenApiDocument } from './openapi.ts';
import { type Precompressed, precompressed, sendPrecompressed } from '../http/precompressed.ts';
import { type AnyOperation, OperationRegistry } from '../operations/operations.ts';
import { GatewayMetrics } from '../gateway/metrics.ts';
import { ApiError } from './errors.ts';
import type { AnyPlugin, PluginContext } from './plugin.ts';
import { resolvePlugins } from './plugin-loader.ts';
import type { Coordination } from '../ports/coordination.ts';
import type { Database, Transaction } from '../ports/database.ts';
import type { KernelAdapters } from '../ports/kernel-adapters.ts';
import { Tokens } from './di-tokens.ts';
import { newRequestId } from './request-ids.ts';
import { REQUEST_ID_PATTERN } from '../vocabulary/ids.ts';
import { lazyRequestLogger } from '../http/request-logger.ts';
import { REDACTED_LOG_PATHS } from './log-redaction.ts';
import { loadSecretKeys } from '../services/secret-keys.ts';
import { SecretVault } from '../services/secret-vault.ts';
import { DomainEvents } from '../events/domain-events.ts';
import { EVENT_CATALOGUE_OWNER, eventTypeOperations } from '../events/event-type-operations.ts';
import { JobQueue } from '../jobs/job-queue.ts';
import { JobRegistry } from '../jobs/job-registry.ts';
import { JobRunner } from '../jobs/job-runner.ts';
import { definePeriodic } from '../jobs/queue-definitions.ts';
import { OperationEvents } from '../operations/operation-events.ts';
import { OperationService } from '../operations/operation-service.ts';
import { OperationTools } from '../operations/operation-tools.ts';
import { mountMcpEndpoint } from '../http/mcp-endpoint.ts';
import { Readiness } from './readiness.ts';
import { mountHealthRoutes } from '../http/health-routes.ts';
import { privateDirectoriesOf, tightenTree } from './private-files.ts';
import { secretMatcher } from '../identity/api-tokens.ts';
import { ConnectorTokensPoint } from '../identity/connector-tokens.ts';
import { type AdvertisedSurface, SurfacesPoint } from './surfaces.ts';
import { OutboundHttpClient } from '../net/outbound-http-client.ts';
import { LongRunningOperations } from '../operations/long-running.ts';
import { JobLogs } from '../jobs/job-logs.ts';
import { OrganizationErasersPoint } from './organization-erasure.ts';
import { Tracing } from '../observability/tracing.ts';

export interface AppOptions {
  /** The plugins the operator may enable (plugins/index.ts in production). */
  manifest: readonly AnyPlugin[];
  clock?: () => Date;
  /** Where process log lines go instead of stdout (tests read them). */
  logStream?: { write(line: string): void };
  /** Randomness of retry jitter (tests pin it). */
  random?: () => number;
  /** The password key derivation (scrypt; tests watch how many run at once). */
  deriveKey?: DeriveKey;
  /**
   * The resolver under the outbound client's guard, at save and at connect time (default: the
   * system's). Tests answer names as a hostile DNS server would, to show a rebound name refused.
   */
  outboundLookup?: LookupFunction;
}

export interface ServiceHandle {
  readonly container: Container;
  readonly config: AppConfig;
  /** Set on the start that created the first organisation; its owner token is shown once. */
  readonly bootstrap: BootstrapResult | null;
  /** This process's job worker (started only when server.role is worker or all). */
  readonly workers: JobRunner;
  /** Every route of the /v1 surface, whichever plugin mounted it (core/http/v1-surface.ts); filled as routes mount. */
  readonly v1Routes: readonly V1Route[];
}

declare module 'fastify' {
  interface FastifyInstance {
    svc: ServiceHandle;
  }
}

/**
 * The kernel's wiring, over adapters composition/build-app.ts has chosen: validates plugins
 * against config, migrates, bootstraps the first organisation, binds the kernel's services, then
 * lets each enabled plugin bind, declare operations and mount routes. Start/stop of plugins ride
 * on Fastify's onReady/onClose. It owns the adapters from here: they close with the app, or at
 * once if building it fails.
 *
 * `server.role` picks what this process does with the same wiring: `api` serves every route and
 * runs no job workers (its enqueues wait for another replica), `worker` runs the workers and
 * periodic jobs and serves only /health, `all` both. Plugins bind and start in every role, so a
 * job handler finds the same services a route would.
 */
export async function buildKernel(config: AppConfig, adapters: KernelAdapters, options: AppOptions): Promise<FastifyInstance> {
  const { stores } = adapters;
  const plugins = resolvePlugins(options.manifest, config.plugins);
  const clock = options.clock ?? (() => new Date());
  const runsWorkers = config.server.role !== 'api';
  const servesApi = config.server.role !== 'worker';

  const app = Fastify({
    logger: {
      level: config.server.logLevel,
      redact: { paths: REDACTED_LOG_PATHS, censor: '[redacted]' },
      ...(options.logStream ? { stream: options.logStream } : {}),
    },
    bodyLimit: config.server.bodyLimitBytes,
    trustProxy: config.server.trustProxy,
    // Request lines are the request log's job (metering); the process log carries problems.
    logController: new LogController({ disableRequestLogging: true }),
    routerOptions: { ignoreTrailingSlash: true, maxParamLength: 500 },
    frameworkErrors: frameworkErrorHandler,
    // Requests the HTTP parser refuses (431, bad bytes, unknown methods, 408) in the envelope.
    clientErrorHandler: clientErrorHandler((): FastifyBaseLogger => app.log, config.server),
    ...serverTimeouts(config.server),
    forceCloseConnections: 'idle',
    // Draining answers are core/http/draining.ts's, in the envelope with retry-after.
    return503OnClosing: false,
    // Always the gateway's own: the id keys the request log (and so the bill), so no caller may
    // pick it; a caller's x-request-id comes back as x-client-request-id instead.
    genReqId: () => newRequestId(),
    childLoggerFactory: lazyRequestLogger,
  });
  app.server.on('connect', refuseConnect);

  let database: Database | null = null;
  let coordination: Coordination | null = null;
  let tracing = Tracing.off;
  try {
    keepDataPrivate(config, app.log);
    database = await adapters.openDatabase();
    coordination = await adapters.openCoordination(database);
    await adapters.migrate(database, [...adapters.migrations, ...plugins.flatMap(({ plugin }) => plugin.migrations ?? [])]);
    const bootstrap = await bootstrapFirstOrganization(database, stores.identity, config, clock());
    const secretKeys = await loadSecretKeys(config);
    if (secretKeys.source.kind === 'file' && secretKeys.source.created) {
      app.log.info({ path: secretKeys.source.path }, 'created the key file that encrypts customer secrets; back it up with the data directory (SVC_SECRET_KEYS replaces it)');
    }
    if (secretKeys.warning) app.log.warn(secretKeys.warning);
    if (config.mail.driver === 'outbox' && database.kind === 'postgres') {
      app.log.warn('mail is kept in the local outbox, not delivered: configure mail.driver smtp');
    }
    const mailer = adapters.mailer(database);
    tracing = await Tracing.start(config.tracing, app.log.child({ component: 'tracing' }));

    const container = Container.create();
    const identity = stores.identity(database);
    const authenticator = new Authenticator(identity.credentials, identity.memberships, coordination.pubsub, {
      cacheTtlMs: config.auth.credentialCacheTtlMs,
      maxEntries: config.auth.credentialCacheMaxEntries,
      now: () => clock().getTime(),
      recordKeyUse: (usedAt) => identity.apiKeys.touch(usedAt),
    });
    const registry = new OperationRegistry({ identity });
    const metrics = new GatewayMetrics();
    shareWorkerMetrics(metrics.registry);
    const jobStore = stores.jobs(database);
    const eventStore = stores.events(database);
    const jobRegistry = new JobRegistry();
    const runner = new JobRunner({
      leases: jobStore,
      periodic: stores.periodic(database),
      database,
      registry: jobRegistry,
      clock,
      ...(options.random ? { random: options.random } : {}),
      logger: app.log.child({ component: 'jobs' }),
      settings: {
        pollIntervalMs: config.jobs.pollIntervalMs,
        drainMs: config.jobs.drainMs ?? Math.floor(config.server.shutdownGraceMs * 0.8),
        ...(config.jobs.queues ? { queues: config.jobs.queues } : {}),
      },
    });
    const jobs = new JobQueue({ store: jobStore, database, registry: jobRegistry, clock, workers: runner });
    const events = new DomainEvents({ store: eventStore, jobs, registry: jobRegistry, clock });
    const retainMs = config.jobs.retainHours * 3_600_000;
    jobRegistry.addPeriodic(
      definePeriodic({
        name: 'kernel.prune',
        everyMs: 3_600_000,
        async run() {
          const before = new Date(clock().getTime() - retainMs);
          await jobStore.pruneFinished(before);
          await eventStore.prune(before);
        },
      }),
    );
    const blobs = adapters.blobs(database);
    // On one replica, not on each one's put path: abandoned uploads are the database's (or the shared volume's).
    jobRegistry.addPeriodic(definePeriodic({ name: 'kernel.blobs-sweep', everyMs: 3_600_000, run: async () => void (await blobs.sweepAbandoned()) }));
    container.bindValue(Tokens.Config, config);
    container.bindValue(Tokens.Logger, app.log);
    container.bindValue(Tokens.Clock, clock);
    container.bindValue(Tokens.Database, database);
    container.bindValue(Tokens.Coordination, coordination);
    container.bindValue(Tokens.Operations, registry);
    const recorder = new OperationEvents(database, events, (error, operation) =>
      app.log.error({ err: error, operation }, 'a management write succeeded but its management.operation event could not be recorded'),
    );
    const operationService = new OperationService(registry, recorder);
    container.bindValue(Tokens.OperationService, operationService);
    container.bindValue(Tokens.OperationTools, new OperationTools(registry, operationService, metrics));
    container.bindValue(Tokens.Authenticator, authenticator);
    container.bindValue(Tokens.Metrics, metrics);
    container.bindValue(Tokens.Identity, identity);
    container.bindValue(Tokens.IdentityFactory, stores.identity);
    container.bindValue(Tokens.Blobs, blobs);
    container.bindValue(Tokens.Secrets, new SecretVault(stores.secrets, database, secretKeys.keyring));
    container.bindValue(Tokens.Mailer, mailer);
    container.bindValue(Tokens.Jobs, jobs);
    container.bindValue(Tokens.Events, events);
    container.bindValue(Tokens.LongRunning, new LongRunningOperations({ store: stores.longRunning(database), jobs, database, clock }));
    const jobLogs = new JobLogs({
      store: stores.jobLogs(database),
      pubsub: coordination.pubsub,
      clock,
      report: (error, stream) => app.log.warn({ err: error, stream }, 'a running job log was not written (tried again) or woken'),
    });
    container.bindValue(Tokens.JobLogs, jobLogs);
    const outbound = new OutboundHttpClient({ ...config.outbound, ...(options.outboundLookup ? { lookup: options.outboundLookup } : {}) });
    container.bindValue(Tokens.OutboundHttp, outbound);
    container.bindValue(Tokens.Tracing, tracing);
    container.bindValue(
      Tokens.SignIn,
      new PeopleSignIn({
        db: database,
        storesFor: stores.identity,
        rateLimiter: coordination.rateLimiter,
        cache: coordination.cache,
        authenticator,
        hasher: new PasswordHasher({
          concurrency: config.auth.passwordHashConcurrency ?? Math.max(1, Math.min(4, availableParallelism() - 1)),
          maxWaiting: config.auth.passwordHashMaxWaiting,
          ...(options.deriveKey ? { derive: options.deriveKey } : {}),
        }),
        clock,
        settings: {
          sessionTtlDays: config.auth.sessionTtlDays,
          attemptsPerAddressAndEmail: config.auth.signInAttemptsPerAddressAndEmail,
          attemptsPerIp: config.auth.signInAttemptsPerIp,
          windowMs: config.auth.signInWindowMinutes * 60_000,
          attemptsPerEmail: config.auth.signInAttemptsPerEmail,
          emailWindowMs: config.auth.signInEmailWindowMinutes * 60_000,
          setPasswordAttemptsPerIp: config.auth.setPasswordAttemptsPerIp,
          setPasswordAttemptsPerToken: config.auth.setPasswordAttemptsPerToken,
        },
      }),
    );
    // Before any route mounts: every /v1 route of every plugin is seen.
    const v1Routes = collectV1Routes(app);
    app.decorate('svc', { container, config, bootstrap, workers: runner, v1Routes });

    // Callback-style hooks on the hot path: no promise per request.
    app.addHook('onRequest', (request, reply, done) => {
      void reply.header('x-request-id', request.id);
      const own = request.headers['x-request-id'];
      // A caller's own correlation id goes back only when it is safe to put in a header.
      if (typeof own === 'string' && REQUEST_ID_PATTERN.test(own)) void reply.header('x-client-request-id', own);
      done();
    });
    installDraining(app);
    // Before the error handling's 404/405 and authentication: a preflight carries no credential.
    installBrowserCors(app);
    installV1ResponseMetrics(app, metrics);
    installErrorHandling(app);
    installJsonBodyParser(app);
    installPublicBodyLimit(app);
    installAuthHook(app, authenticator, { ownOrigin: publicOriginOf(config.server.publicUrl) });
    installRouteResources(app, { identity });

    const extensions = new ExtensionRegistry();
    // The kernel's own table naming organisations: a running job's log goes with its organisation.
    const eraseJobLogs = (tx: Transaction, id: string) => jobLogs.eraseForOrganization(tx, id);
    const jobLogsEraser = { name: 'running job logs', erase: eraseJobLogs };
    extensions.forPlugin('kernel').contribute(OrganizationErasersPoint, jobLogsEraser);
    const contexts = plugins.map(({ plugin, config: pluginConfig }) => ({
      plugin,
      ctx: {
        config: pluginConfig,
        appConfig: config,
        container,
        extensions: extensions.forPlugin(plugin.name),
        logger: app.log.child({ plugin: plugin.name }),
      } satisfies PluginContext<unknown>,
    }));
    for (const { plugin, ctx } of contexts) plugin.register?.(ctx);
    extensions.closeRegistration();
    // Read once every plugin has provided its own; installed before any route mounts, so it covers all of /v1.
    installRateLimitHeaders(app, extensions.forPlugin('kernel').get(InferenceAdmissionPoint));
    authenticator.useConnectorTokens(extensions.forPlugin('kernel').get(ConnectorTokensPoint));
    const servesOperation = (operation: AnyOperation) => operation.wide !== true || config.server.routeSet === 'wide';
    for (const { plugin, ctx } of contexts) {
      for (const operation of plugin.operations?.(ctx) ?? []) if (servesOperation(operation)) registry.add(operation, plugin);
    }
    for (const operation of eventTypeOperations()) registry.add(operation, EVENT_CATALOGUE_OWNER);
    for (const { plugin, ctx } of contexts) {
      for (const queue of plugin.queues?.(ctx) ?? []) jobRegistry.addQueue(queue);
      for (const periodic of plugin.periodic?.(ctx) ?? []) jobRegistry.addPeriodic(periodic);
      for (const subscriber of plugin.subscribers?.(ctx) ?? []) events.subscribe(subscriber);
    }

    mountHealthRoutes(app, new Readiness({ database, coordination, jobs: runsWorkers ? runner : null }));
    if (servesApi) {
      mountCoreRoutes(app, registry, config, metrics, extensions.forPlugin('kernel').all(SurfacesPoint));
      mountAuthRoutes(app, container.resolve(Tokens.SignIn), config);
      await mountOperations(app, { registry, service: operationService, blobs, jsonBodyLimit: config.server.bodyLimitBytes, publicOrigin: publicOriginOf(config.server.publicUrl) });
      mountMcpEndpoint(app, '/mcp', { accepts: ['key', 'session'] });
      for (const { plugin, ctx } of contexts) {
        if (plugin.routes) await app.register(async (scope) => plugin.routes!(scope, ctx));
      }
    }

    const db = database;
    const coord = coordination;
    app.addHook('onReady', async () => {
      await authenticator.start();
      for (const { plugin, ctx } of contexts) await plugin.start?.(ctx);
      if (runsWorkers) runner.start();
    });
    // Claiming stops as soon as shutdown begins; running jobs finish alongside in-flight requests.
    app.addHook('preClose', (done) => {
      runner.stopClaiming();
      done();
    });
    app.addHook('onClose', async () => {
      try {
        await runner.close();
      } catch (error) {
        app.log.error({ err: error }, 'job worker failed to stop cleanly');
      }
      for (const { plugin, ctx } of [...contexts].reverse()) {
        try {
          await plugin.stop?.(ctx);
        } catch (error) {
          app.log.error({ err: error, plugin: plugin.name }, 'plugin failed to stop cleanly');
        }
      }
      await authenticator.stop();
      // After the plugins: a call's settle span ends once metering has drained its settlements.
      await tracing.shutdown();
      await outbound.close();
      mailer.close?.();
      await coord.close();
      await db.close();
    });
    return app;
  } catch (error) {
    await tracing.shutdown();
    await coordination?.close().catch(() => undefined);
    await database?.close().catch(() => undefined);
    await app.close().catch(() => undefined);
    throw error;
  }
}

function mountCoreRoutes(app: FastifyInstance, registry: OperationRegistry, config: AppConfig, metrics: GatewayMetrics, pluginSurfaces: readonly AdvertisedSurface[]): void {
  // Lists only what this deployment serves: a surface whose plugin is off is not advertised.
  app.get('/', { config: { auth: false, surface: 'root' } }, async () => ({
    object: 'service',
    surfaces: {
      ...(app.hasRoute({ method: 'GET', url: '/v1' }) ? { inference: '/v1' } : {}),
      management: '/client',
      regionalManagement: '/platform/v1',
      mcp: '/mcp',
      ...Object.fromEntries(pluginSurfaces.map((surface) => [surface.name, surface.url])),
    },
    openapi: '/client/openapi.json',
    ...(config.metrics.enabled ? { metrics: '/metrics' } : {}),
  }));
  if (config.metrics.enabled) {
    const token = config.metrics.bearerToken;
    // In constant time: a `!==` returns sooner the earlier a guess differs, which can be measured.
    const presentsToken = token ? secretMatcher(`Bearer ${token}`) : null;
    app.get('/metrics', { config: { auth: false, surface: 'root' } }, async (request, reply) => {
      if (presentsToken && !presentsToken(authorizationHeader(request.raw))) {
        throw new ApiError('invalid_metrics_token');
      }
      return reply.type(metrics.registry.contentType).send(await workerMetrics(metrics.registry));
    });
  }

  for (const prefix of MANAGEMENT_PREFIXES) {
    // Each surface describes its own paths, so a client generated from either calls that surface.
    // Built, serialised and compressed once: it is large (hundreds of KB) and the console asks for it at every start.
    let document: Precompressed | null = null;
    app.get(`${prefix}/openapi.json`, { config: { auth: false, surface: 'client' } }, async (request, reply) => {
      document ??= precompressed(
        JSON.stringify(buildOpenApiDocument(registry.list(), { prefix, publicUrl: config.server.publicUrl, ownerOf: (name) => registry.ownerOf(name) })),
        'application/json; charset=utf-8',
      );
      // Revalidated each time (a redeploy changes it), answered 304 while unchanged.
      return sendPrecompressed(request, reply.header('cache-control', 'no-cache'), document);
    });
  }

  for (const prefix of MANAGEMENT_PREFIXES) {
    app.get(`${prefix}/`, { config: { auth: { scope: null }, surface: 'client' } }, async (request) => {
      const credential = request.credential!;
      return {
        object: 'surface',
        surface: 'management',
        openapi: `${prefix}/openapi.json`,
        operations: registry
          .list()
          .filter((op) => op.scope === null || credential.scopes.has(op.scope))
          .map((op) => ({ name: op.name, method: op.method, path: prefix + op.path, summary: op.summary })),
      };
    });
  }
}

/**
 * Node's limits on receiving a request (server.* in config): the header section, the whole request,
 * and the idle time between kept-alive requests. None applies while a response is being sent, so
 * long streams are not cut; Fastify's connectionTimeout (socket inactivity in either direction)
 * stays off for that reason, as it would cut a stream still waiting for its first token. Node
 * checks the first two on a timer whose default period (30 s) would let a trickling client stay
 * far past a short limit, so the period follows the limit.
 */
function serverTimeouts(server: AppConfig['server']) {
  return {
    requestTimeout: server.requestTimeoutMs,
    keepAliveTimeout: server.keepAliveTimeoutMs,
    http: {
      headersTimeout: server.headersTimeoutMs,
      requestTimeout: server.requestTimeoutMs,
      connectionsCheckingInterval: Math.max(10, Math.min(1_000, Math.floor(server.headersTimeoutMs / 4))),
    },
  };
}

/**
 * Before anything opens them: the service's own directories, left readable by other users by an
 * earlier version or a copy, are made private again, with one log line saying how much changed.
 */
function keepDataPrivate(config: AppConfig, log: FastifyBaseLogger): void {
  const directories = privateDirectoriesOf(config);
  let tightened = 0;
  const failed: string[] = [];
  for (const directory of directories) {
    const result = tightenTree(directory);
    tightened += result.tightened;
    failed.push(...result.failed);
  }
  if (tightened === 0 && failed.length === 0) return;
  const unchanged = failed.length === 0 ? '' : `; ${failed.length} could not be changed`;
  const message = `other users could read ${tightened} of the service's files and folders; they are private to this user now${unchanged}`;
  log.warn({ directories, tightened, failed: failed.slice(0, 10) }, message);
}
