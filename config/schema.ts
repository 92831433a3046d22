import { z } from 'zod';

/**
 * The operator's configuration file, validated at boot. Plugin sections are validated by each
 * plugin's own schema once the enabled set is known (see core/plugin-loader.ts).
 */
const pgliteDatabase = z.strictObject({
  driver: z.literal('pglite'),
  /** Directory for the embedded database; `memory://` keeps it in memory (tests). */
  dataDir: z.string().min(1).default('./data/pglite'),
});

const postgresDatabase = z.strictObject({
  driver: z.literal('postgres'),
  url: z.string().min(1),
  /** Optional schema (search_path); lets several deployments or tests share one database. */
  schema: z.string().regex(/^[a-z_][a-z0-9_]*$/).optional(),
  poolSize: z.number().int().min(1).max(200).default(20),
});

const memoryCoordination = z.strictObject({ driver: z.literal('memory') });
const redisCoordination = z.strictObject({
  driver: z.literal('redis'),
  url: z.string().min(1),
  keyPrefix: z.string().default('svc:'),
  /** After Redis lost its data, how long admissions wait for every replica to report its calls in flight. */
  recoveryWindowMs: z.number().int().min(20).max(60_000).default(5_000),
});

export const configSchema = z.strictObject({
  server: z
    .strictObject({
      host: z.string().min(1).default('127.0.0.1'),
      port: z.number().int().min(0).max(65535).default(8080),
      /** Largest request body accepted on any surface (the spec's inference limit: 10 MB). */
      bodyLimitBytes: z.number().int().min(1024).default(10 * 1024 * 1024),
      trustProxy: z.boolean().default(false),
      logLevel: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
      /** How long SIGTERM waits for in-flight requests before closing anyway. */
      shutdownGraceMs: z.number().int().min(0).default(10_000),
      /** The address clients use; shown in indexes and given to apps. */
      publicUrl: z.string().url().optional(),
    })
    .prefault({}),
  storage: z
    .strictObject({
      database: z.discriminatedUnion('driver', [pgliteDatabase, postgresDatabase]).prefault({ driver: 'pglite' }),
      coordination: z.discriminatedUnion('driver', [memoryCoordination, redisCoordination]).prefault({ driver: 'memory' }),
    })
    .prefault({}),
  auth: z
    .strictObject({
      /**
       * How long a looked-up credential is trusted before it is read again. Revocation is also
       * pushed to every replica over pub/sub; this bound holds even if a message is lost.
       */
      credentialCacheTtlMs: z.number().int().min(0).max(60_000).default(1000),
      credentialCacheMaxEntries: z.number().int().min(1).default(50_000),
      sessionTtlDays: z.number().int().min(1).max(365).default(30),
    })
    .prefault({}),
  bootstrap: z
    .strictObject({
      organizationName: z.string().min(1).default('My organisation'),
      ownerEmail: z.string().email().default('owner@example.com'),
      ownerName: z.string().min(1).default('Owner'),
      /** Used as the first owner session token instead of a random one (automation). */
      ownerToken: z.string().regex(/^svc_sess_[A-Za-z0-9]{24,}$/, 'must look like svc_sess_ followed by at least 24 letters or digits').optional(),
      /** Print the new owner token on first start (off in tests). */
      printOwnerToken: z.boolean().default(true),
    })
    .prefault({}),
  jobs: z
    .strictObject({
      /** How often an idle worker looks for due jobs, expired leases and periodic ticks (enqueues in this process wake it at once). */
      pollIntervalMs: z.number().int().min(10).max(60_000).default(1000),
      /** On shutdown, how long running jobs may finish before their leases are given back; default: 80 % of server.shutdownGraceMs. */
      drainMs: z.number().int().min(0).optional(),
      /** Finished jobs and events older than this are deleted (an idempotency key is remembered that long). */
      retainHours: z.number().int().min(1).default(168),
    })
    .prefault({}),
  metrics: z
    .strictObject({
      enabled: z.boolean().default(true),
      /** When set, GET /metrics needs "Authorization: Bearer <token>"; otherwise keep the port internal. */
      bearerToken: z.string().min(16).optional(),
    })
    .prefault({}),
  /** Enabled plugins by name, each with its own settings (`{}` or `true` for the defaults). */
  plugins: z.record(z.string(), z.unknown()).default({}),
});

export type AppConfig = z.output<typeof configSchema>;
export type AppConfigInput = z.input<typeof configSchema>;
