import { z } from 'zod';

/**
 * The operator's configuration file, validated at boot. Plugin sections are validated by each
 * plugin's own schema once the enabled set is known (see core/kernel/plugin-loader.ts).
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
  schema: z
    .string()
    .regex(/^[a-z_][a-z0-9_]*$/)
    .optional(),
  poolSize: z.number().int().min(1).max(200).default(20),
});

const memoryCoordination = z.strictObject({ driver: z.literal('memory') });
const redisCoordination = z.strictObject({
  driver: z.literal('redis'),
  url: z.string().min(1),
  keyPrefix: z.string().default('svc:'),
  /** After Redis lost its data, the longest admissions wait for a live replica to report its calls in flight (all reported: at once). */
  recoveryWindowMs: z.number().int().min(20).max(60_000).default(5_000),
});

/** Where blob contents (uploaded files, batch inputs and outputs) live. */
const filesystemBlobs = z.strictObject({
  driver: z.literal('filesystem'),
  /** Default `<storage.dataDir>/blobs`. Replicas need it on a shared volume. */
  dir: z.string().min(1).optional(),
});
const databaseBlobs = z.strictObject({ driver: z.literal('database') });

/** `id:key`, the key 32 bytes in standard base64; the id is stored next to each ciphertext. */
export const SECRET_KEY_PATTERN = /^[A-Za-z0-9_-]{1,32}:[A-Za-z0-9+/]{43}=$/;

const outboxMail = z.strictObject({
  driver: z.literal('outbox'),
  from: z.string().min(3).default('svc <no-reply@localhost>'),
});
const smtpMail = z
  .strictObject({
    driver: z.literal('smtp'),
    /** `smtp://user:pass@host:587` or `smtps://...:465`; or host/port/secure/auth below. */
    url: z
      .string()
      .regex(/^smtps?:\/\//, 'must start with smtp:// or smtps://')
      .optional(),
    host: z.string().min(1).optional(),
    port: z.number().int().min(1).max(65535).optional(),
    /** TLS from the first byte (port 465); otherwise STARTTLS when the server offers it. */
    secure: z.boolean().optional(),
    /** Refuse to send unless the connection is upgraded with STARTTLS. */
    requireTls: z.boolean().default(false),
    auth: z.strictObject({ user: z.string().min(1), pass: z.string().min(1) }).optional(),
    from: z.string().min(3),
    timeoutMs: z.number().int().min(100).max(300_000).default(30_000),
  })
  .refine((mail) => (mail.url === undefined) !== (mail.host === undefined), { message: 'give either url or host', path: ['host'] });

export const configSchema = z.strictObject({
  server: z
    .strictObject({
      host: z.string().min(1).default('127.0.0.1'),
      port: z.number().int().min(0).max(65535).default(8080),
      /** Largest request body accepted on any surface (the spec's inference limit: 10 MB). */
      bodyLimitBytes: z
        .number()
        .int()
        .min(1024)
        .default(10 * 1024 * 1024),
      /** Default whole-body limit of multipart upload routes (files, audio); a route may declare its own. */
      uploadLimitBytes: z
        .number()
        .int()
        .min(1024)
        .default(512 * 1024 * 1024),
      trustProxy: z.boolean().default(false),
      logLevel: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
      /** How long SIGTERM waits for in-flight requests before closing anyway. */
      shutdownGraceMs: z.number().int().min(0).default(10_000),
      /**
       * How long a client may take to send a request's headers, and its whole request (headers and
       * body), before it is answered 408 and disconnected: a client trickling bytes must not hold a
       * connection for as long as it likes. They bound receiving only; a response may stream for
       * as long as it needs.
       */
      headersTimeoutMs: z.number().int().min(1).default(10_000),
      requestTimeoutMs: z.number().int().min(1).default(120_000),
      /** How long a kept-alive connection may sit idle between requests before it is closed. */
      keepAliveTimeoutMs: z.number().int().min(1).default(72_000),
      /** The address clients use; shown in indexes and given to apps. */
      publicUrl: z.string().url().optional(),
      /**
       * What this process does: `api` serves HTTP and runs no jobs, `worker` runs the job queue's
       * workers and periodic jobs and serves only /health, `all` both (`--role`, SVC_ROLE).
       */
      role: z.enum(['api', 'worker', 'all']).default('all'),
      /**
       * Processes sharing the listening port (`SVC_WORKERS`): a number, or `auto` for one per core. More
       * than one needs PostgreSQL and Redis, as replicas do (core/kernel/worker-processes.ts).
       */
      workers: z.union([z.number().int().min(1).max(256), z.literal('auto')]).default(1),
      /**
       * Which route set this host serves. `wide` (the default) is the regional host with the wider set;
       * `narrow` leaves out every operation declared `wide` (route, OpenAPI entry and MCP tool alike) and
       * `GET /v1/models/{model}`.
       */
      routeSet: z.enum(['wide', 'narrow']).default('wide'),
    })
    .refine((server) => server.headersTimeoutMs <= server.requestTimeoutMs, {
      path: ['headersTimeoutMs'],
      message: 'must not exceed server.requestTimeoutMs (the headers are part of the request)',
    })
    .prefault({}),
  storage: z
    .strictObject({
      /** The service's own files on this machine: the billing journal, blob files, the generated secret key, and by default the embedded database. */
      dataDir: z.string().min(1).default('./data'),
      database: z.discriminatedUnion('driver', [pgliteDatabase, postgresDatabase]).prefault({ driver: 'pglite' }),
      coordination: z.discriminatedUnion('driver', [memoryCoordination, redisCoordination]).prefault({ driver: 'memory' }),
      /**
       * Absent: files under `<dataDir>/blobs` when the database is embedded on disk; the database
       * otherwise (PostgreSQL, which replicas share, or an in-memory database).
       */
      blobs: z.discriminatedUnion('driver', [filesystemBlobs, databaseBlobs]).optional(),
    })
    .prefault({}),
  /** Customer-given secrets (upstream credentials, signing secrets, app env values) are encrypted under these. */
  secrets: z
    .strictObject({
      /**
       * `id:base64key` entries (SVC_SECRET_KEYS, comma-separated): the first encrypts, all decrypt.
       * Absent: a key file (below) on the embedded database, a throwaway key on an in-memory one.
       */
      keys: z
        .array(z.string().regex(SECRET_KEY_PATTERN, 'must be id:key with a 32-byte key in base64 (openssl rand -base64 32)'))
        .refine((keys) => new Set(keys.map((k) => k.split(':')[0])).size === keys.length, 'key ids must be unique')
        .default([]),
      /** Read (and created on first start if missing) when no keys are given; default `<dataDir>/secret-keys`. */
      keyFile: z.string().min(1).optional(),
    })
    .prefault({}),
  mail: z.discriminatedUnion('driver', [outboxMail, smtpMail]).prefault({ driver: 'outbox' }),
  auth: z
    .strictObject({
      /**
       * How long a looked-up credential is trusted before it is read again. Revocation is also
       * pushed to every replica over pub/sub; this bound holds even if a message is lost.
       */
      credentialCacheTtlMs: z.number().int().min(0).max(60_000).default(1000),
      credentialCacheMaxEntries: z.number().int().min(1).default(50_000),
      sessionTtlDays: z.number().int().min(1).max(365).default(30),
      /** Sign-in attempts (right or wrong) per client address and email, and per address, in each signInWindowMinutes. */
      signInAttemptsPerAddressAndEmail: z.number().int().min(1).default(10),
      signInAttemptsPerIp: z.number().int().min(1).default(100),
      signInWindowMinutes: z.number().int().min(1).max(1440).default(15),
      /**
       * Attempts per email, summed over every address the person has not signed in from (within
       * sessionTtlDays), in each signInEmailWindowMinutes; the person's own addresses are exempt.
       */
      signInAttemptsPerEmail: z.number().int().min(1).default(30),
      signInEmailWindowMinutes: z.number().int().min(1).max(1440).default(60),
      /** set-password attempts per client address, and per token, in each signInWindowMinutes. */
      setPasswordAttemptsPerIp: z.number().int().min(1).default(10),
      setPasswordAttemptsPerToken: z.number().int().min(1).default(5),
      /** Password hashes computed at once (32 MiB each); default: the cores less one, 1 to 4. */
      passwordHashConcurrency: z.number().int().min(1).max(64).optional(),
      /** Hashes that may wait for one of those; past it sign-in answers 503 password_hashing_busy. */
      passwordHashMaxWaiting: z.number().int().min(0).default(64),
      /** How long an invitation to an organisation (its accept link) stays usable; resending starts it again. */
      invitationTtlHours: z.number().int().min(1).max(720).default(168),
      /** How long a set-password token an operator mails (`people reset-password`) stays usable. */
      passwordTokenTtlHours: z.number().int().min(1).max(720).default(24),
    })
    .prefault({}),
  bootstrap: z
    .strictObject({
      organizationName: z.string().min(1).default('My organisation'),
      ownerEmail: z.string().email().default('owner@example.com'),
      ownerName: z.string().min(1).default('Owner'),
      /** Used as the first owner session token instead of a random one (automation). */
      ownerToken: z
        .string()
        .regex(/^svc_sess_[A-Za-z0-9]{24,}$/, 'must look like svc_sess_ followed by at least 24 letters or digits')
        .optional(),
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
      /**
       * The queues this process's worker claims (`--queues`, SVC_JOB_QUEUES, comma-separated): names
       * (`apps.build`) or prefixes ending in `.*` (`event.*`, `periodic.*`). Absent: every queue. So
       * builds can run on dedicated workers (`--role worker --queues apps.build`) while the others
       * take `--queues` without it.
       */
      queues: z
        .array(z.string().regex(/^[a-z][a-z0-9_-]*(\.[a-z0-9_-]+)*(\.\*)?$/, 'a queue name (apps.build) or a prefix ending in .* (event.*)'))
        .min(1)
        .optional(),
    })
    .prefault({}),
  /** The HTTP client for URLs customers give (webhook endpoints, customers' MCP servers): core/net/outbound-http-client.ts. */
  outbound: z
    .strictObject({
      /** Let customers' URLs reach private and loopback addresses: an operator whose endpoints are on its own network, and tests. */
      allowPrivateNetwork: z.boolean().default(false),
      connectTimeoutMs: z.number().int().min(1).max(60_000).default(5_000),
      /** From sending a request to the answer's last byte; a caller may ask for its own. */
      totalTimeoutMs: z.number().int().min(1).max(600_000).default(30_000),
      /** The most of an answer's body read; past it the call fails (a caller may ask for its own cap). */
      maxResponseBytes: z
        .number()
        .int()
        .min(1)
        .default(1024 * 1024),
    })
    .prefault({}),
  metrics: z
    .strictObject({
      enabled: z.boolean().default(true),
      /** When set, GET /metrics needs "Authorization: Bearer <token>"; otherwise keep the port internal. */
      bearerToken: z.string().min(16).optional(),
    })
    .prefault({}),
  /**
   * OpenTelemetry traces of gateway calls, exported over OTLP/HTTP (JSON): off unless an endpoint is
   * given (here or in OTEL_EXPORTER_OTLP_TRACES_ENDPOINT / OTEL_EXPORTER_OTLP_ENDPOINT).
   */
  tracing: z
    .strictObject({
      /** `false` keeps the endpoint but traces nothing (OTEL_SDK_DISABLED=true). */
      enabled: z.boolean().default(true),
      /** Where spans are POSTed, e.g. `http://127.0.0.1:4318/v1/traces`. */
      otlpEndpoint: z
        .string()
        .url()
        .regex(/^https?:\/\//, 'must be an http:// or https:// URL')
        .optional(),
      /** The resource's `service.name` (OTEL_SERVICE_NAME). */
      serviceName: z.string().min(1).default('svc-gateway'),
      /** Share of new traces recorded; a caller's `traceparent` decides for its own trace (parent-based sampling). */
      sampleRatio: z.number().min(0).max(1).default(1),
      /** Sent with every export (a collector's API key); OTEL_EXPORTER_OTLP_HEADERS and OTEL_EXPORTER_OTLP_TRACES_HEADERS add to them. */
      headers: z.record(z.string().min(1), z.string()).default({}),
      /** The longest one export may take (also the most a shutdown waits for the last one). */
      exportTimeoutMs: z.number().int().min(100).max(60_000).default(10_000),
    })
    .prefault({}),
  /** Enabled plugins by name, each with its own settings (`{}` or `true` for the defaults). */
  plugins: z.record(z.string(), z.unknown()).default({}),
});

export type AppConfig = z.output<typeof configSchema>;
export type AppConfigInput = z.input<typeof configSchema>;
