/**
 * Child process: the gateway under test, alone in its process so its RSS is its own. Built from
 * code like test/helpers/app.ts does, but with what `npm start` runs: embedded PGlite on disk,
 * memory coordination, authentication and every kernel hook on, and the plugin set of
 * config/default.yaml. The inference plugin reaches the fake upstream through the `openai`
 * provider type. Started by bench/gateway-overhead.ts with:
 *
 *   BENCH_UPSTREAM_URL  origin of the fake upstream (http://127.0.0.1:port)
 *   BENCH_OWNER_TOKEN   bootstrap owner session token (the parent creates a key with it)
 *   BENCH_DATA_DIR      an empty directory: the service's data directory (PGlite, the billing journal)
 *   BENCH_MODEL         the model name the bench asks for (same name upstream)
 *   BENCH_PACED_MODEL   optional: a second model like it (same name upstream), for the paced streams
 *   BENCH_EMBEDDING_MODEL  optional: an embedding model of that name (same name upstream), for the
 *                       embeddings sections; unset with BENCH_ONLY=chat, so older commits still start
 *   BENCH_DATABASE_URL, BENCH_DATABASE_SCHEMA, BENCH_REDIS_URL, BENCH_REDIS_PREFIX
 *                       optional: PostgreSQL instead of PGlite (to see what PGlite costs)
 *   BENCH_PREPARE=1     first start only: create the database (initdb, migrations, bootstrap),
 *                       report this process's peak memory and exit, so the measured run starts
 *                       like every later start of a deployment (existing data directory)
 *   BENCH_CONSOLE_DIR   optional: the console build to serve at /console/ (section 10)
 *   BENCH_WORKERS=n     optional: `server.workers` = n, this process the cluster primary and n workers
 *                       on one port (bench/gateway-primary.ts); needs PostgreSQL and Redis, as the
 *                       service does
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { AddressInfo } from 'node:net';
import { parse as parseYaml } from 'yaml';
import { DEFAULT_CONFIG_PATH, parseConfig } from '../config/load.ts';
import type { AppConfigInput } from '../config/schema.ts';
import { isWorkerProcess, reportListening, unsharedStorage } from '../core/kernel/worker-processes.ts';
import { runBenchPrimary } from './gateway-primary.ts';
import { exitWithParent, processStats, tellParent, type ParentMessage } from './ipc.ts';
import { PhaseProfiler } from './phase-profiler.ts';

function required(name: string): string {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set (this file is started by bench/gateway-overhead.ts)`);
  return value;
}

type PluginSections = Record<string, unknown>;

function record(value: unknown): Record<string, unknown> {
  return value && typeof value === 'object' && !Array.isArray(value) ? (value as Record<string, unknown>) : {};
}

/**
 * The plugin section: exactly the plugins `npm start` enables (config/default.yaml `plugins:`),
 * with default.yaml's settings, then the bench's overrides below.
 */
function benchPlugins(upstreamOrigin: string, model: string, pacedModel: string | undefined, embeddingModel: string | undefined): PluginSections {
  const defaults = record(record(parseYaml(readFileSync(DEFAULT_CONFIG_PATH, 'utf8'))).plugins);
  const defaultInference = record(defaults.inference);
  const overrides: PluginSections = {};

  // The /v1 gateway: default.yaml's providers and models (the mock) stay, plus the fake upstream
  // through the real `openai` provider type. Timeouts, failover and circuit breaker: defaults.
  const chatModel = (name: string) => ({
    routes: [{ provider: 'upstream', model: name }],
    // The batch section runs a batch of it.
    batch: true,
    contextWindow: 128_000,
    maxOutputTokens: 16_384,
    prices: { inputPerMTokUsd: 0.15, cachedInputPerMTokUsd: 0.075, outputPerMTokUsd: 0.6 },
  });
  overrides.inference = {
    ...defaultInference,
    providers: {
      ...record(defaultInference.providers),
      upstream: { type: 'openai', baseUrl: `${upstreamOrigin}/v1`, apiKey: 'sk-bench-upstream', allowPrivateNetwork: true },
    },
    models: {
      ...record(defaultInference.models),
      [model]: chatModel(model),
      // The same model under the name the fake answers with paced streams.
      ...(pacedModel && { [pacedModel]: chatModel(pacedModel) }),
      // Priced like OpenAI's, so embeddings are metered and reserved exactly as chat is.
      ...(embeddingModel && {
        [embeddingModel]: {
          routes: [{ provider: 'upstream', model: embeddingModel }],
          modalities: { input: ['text'], output: ['embedding'] },
          contextWindow: 8_192,
          prices: { inputPerMTokUsd: 0.02, outputPerMTokUsd: 0 },
        },
      }),
    },
  };

  // ---- Governance plugins on the /v1 hot path ---------------------------------------------------
  // Metering, rate limits, budgets, usage: whatever config/default.yaml enables is enabled here too,
  // with default.yaml's settings, because the bench must measure what `npm start` runs. Override a
  // plugin below only where the bench needs other numbers, and only if default.yaml enables it
  // (an entry in `overrides` enables the plugin).

  // Metering: every check stays on (request and token windows, concurrency leases, credit
  // reservations, the request log); only the numbers are raised so that a few hundred thousand
  // requests from one key within a minute never answer 429 or 402.
  if ('metering' in defaults) {
    const metering = record(defaults.metering);
    const limits = record(metering.limits);
    overrides.metering = {
      ...metering,
      initialCreditUsd: 10_000,
      limits: {
        ...limits,
        keyDefaults: { ...record(limits.keyDefaults), requestsPerMinute: 100_000_000, tokensPerMinute: 100_000_000_000, concurrency: 10_000 },
      },
    };
  }

  // The web console, served from the bundle the parent built (section 10); older commits ignore it.
  const consoleDir = process.env.BENCH_CONSOLE_DIR;
  if (consoleDir && 'console' in defaults) overrides.console = { ...record(defaults.console), dir: consoleDir };

  // The apps proxy (default.yaml: 8081) on a free port: the bench measures /v1, beside whatever runs here.
  if ('apps' in defaults) overrides.apps = { ...record(defaults.apps), proxy: { ...record(record(defaults.apps).proxy), port: 0 } };

  return { ...defaults, ...overrides };
}

/** What the bench parent asks between phases: memory figures, and (BENCH_PROFILE=1) a profile per phase. */
async function answerParent(message: ParentMessage, profiler: PhaseProfiler): Promise<void> {
  try {
    if (message.type === 'stats') {
      await tellParent(processStats(message.gc === true));
    } else if (message.type === 'profile-start') {
      await profiler.start();
      await tellParent({ type: 'profile-started' });
    } else if (message.type === 'profile-stop') {
      await profiler.stop(message.file);
      await tellParent({ type: 'profile-written', file: message.file });
    }
  } catch (error) {
    await tellParent({ type: 'error', message: `gateway child: ${message.type} failed: ${error instanceof Error ? error.message : String(error)}` });
  }
}

async function main(): Promise<void> {
  const upstreamOrigin = required('BENCH_UPSTREAM_URL');
  const ownerToken = required('BENCH_OWNER_TOKEN');
  const dataDir = required('BENCH_DATA_DIR');
  const model = required('BENCH_MODEL');

  const workers = Number(process.env.BENCH_WORKERS || '1');
  const raw: AppConfigInput = {
    server: { host: '127.0.0.1', port: 0, logLevel: 'warn', workers },
    storage: {
      dataDir,
      database: process.env.BENCH_DATABASE_URL
        ? { driver: 'postgres', url: process.env.BENCH_DATABASE_URL, schema: required('BENCH_DATABASE_SCHEMA') }
        : { driver: 'pglite', dataDir: join(dataDir, 'pglite') },
      coordination: process.env.BENCH_REDIS_URL ? { driver: 'redis', url: process.env.BENCH_REDIS_URL, keyPrefix: `${required('BENCH_REDIS_PREFIX')}:` } : { driver: 'memory' },
    },
    bootstrap: { ownerToken, printOwnerToken: false },
    // Section 9's MCP upstream listens on loopback, which customer URLs may reach only with this (off
    // by default, and in npm start). The inference provider's own allowPrivateNetwork covers /v1 already.
    outbound: { allowPrivateNetwork: true },
    plugins: benchPlugins(upstreamOrigin, model, process.env.BENCH_PACED_MODEL || undefined, process.env.BENCH_EMBEDDING_MODEL || undefined),
  };
  // No environment: PORT, DATABASE_URL and friends must not change what is measured.
  const config = parseConfig(raw, {});
  // As main.ts does: the primary of several workers serves nothing itself. The first start
  // (BENCH_PREPARE) stays one process: it only creates the database.
  if (workers > 1 && !isWorkerProcess() && process.env.BENCH_PREPARE !== '1') {
    const refusal = unsharedStorage(config.storage);
    if (refusal !== null) throw new Error(`BENCH_WORKERS=${workers}: ${refusal} (BENCH_DATABASE_URL and BENCH_REDIS_URL here)`);
    await runBenchPrimary(workers, config.server.shutdownGraceMs);
  }
  // Imported here, not at the top: a cluster's primary needs none of it (its memory counts too).
  const [{ buildApp }, { manifest }] = await Promise.all([import('../composition/build-app.ts'), import('../plugins/index.ts')]);
  const app = await buildApp(config, { manifest });
  if (process.env.BENCH_PREPARE === '1') {
    await app.ready();
    await tellParent({ type: 'prepared', setPasswordToken: app.svc.bootstrap?.setPasswordToken ?? null });
    await app.close();
    await tellParent(processStats());
    process.exit(0);
  }
  // Workers of one primary listening on port 0 all get the same port (the cluster shares one handle).
  await app.listen({ host: '127.0.0.1', port: 0 });
  reportListening();
  const { port } = app.server.address() as AddressInfo;

  const profiler = new PhaseProfiler();
  exitWithParent(
    () => app.close(),
    (message) => void answerParent(message, profiler),
  );
  await tellParent({ type: 'ready', url: `http://127.0.0.1:${port}`, plugins: Object.keys(config.plugins) });
}

main().catch(async (error: unknown) => {
  await tellParent({ type: 'error', message: `gateway failed to start: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}` });
  process.exit(1);
});
