import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FastifyInstance, LightMyRequestResponse } from 'fastify';
import { parseConfig } from '../../config/load.ts';
import type { AppConfig, AppConfigInput } from '../../config/schema.ts';
import { buildApp } from '../../composition/build-app.ts';
import type { AppOptions } from '../../core/kernel/app.ts';
import type { AnyPlugin } from '../../core/kernel/plugin.ts';
import { generateToken, SESSION_PREFIX } from '../../core/identity/api-tokens.ts';
import { addPersonTo, issueSession } from '../../core/identity/identity-admin.ts';
import { Tokens } from '../../core/kernel/di-tokens.ts';
import { manifest as defaultManifest } from '../../plugins/index.ts';
import { dropSchema, randomSchemaName, testPgUrl } from './databases.ts';

export interface TapLike {
  teardown(fn: () => unknown): void;
}

export interface TestAppOptions {
  /** Raw config merged over the test defaults (in-memory PGlite, memory coordination, quiet logs). */
  config?: AppConfigInput;
  /** `plugins:` section; defaults to every plugin in the manifest with its defaults. */
  plugins?: Record<string, unknown>;
  manifest?: readonly AnyPlugin[];
  clock?: () => Date;
  /** Ready the app (start plugins) before returning; default true. */
  ready?: boolean;
  /** Receives the process log's lines (set config.server.logLevel to see any). */
  logStream?: { write(line: string): void };
  random?: () => number;
  /** Replaces scrypt for people's passwords (see AppOptions.deriveKey). */
  deriveKey?: AppOptions['deriveKey'];
  /** The resolver under the outbound client's guard (see AppOptions.outboundLookup). */
  outboundLookup?: AppOptions['outboundLookup'];
}

export interface TestApp {
  app: FastifyInstance;
  config: AppConfig;
  /** The bootstrap owner's session token. */
  ownerToken: string;
  organizationId: string;
  defaultProjectId: string;
  /** app.inject with the given bearer token and a JSON body. */
  call(method: string, url: string, options?: { token?: string | null; body?: unknown; headers?: Record<string, string> }): Promise<LightMyRequestResponse>;
}

/** Settings tests need that differ from a plugin's defaults: enough credit to make calls. */
const TEST_PLUGIN_SETTINGS: Record<string, unknown> = {
  metering: { initialCreditUsd: 100 },
  // The apps proxy on a port of the system's choosing: several test apps run at once.
  apps: { proxy: { port: 0 } },
};

export function allPlugins(manifest: readonly AnyPlugin[] = defaultManifest): Record<string, unknown> {
  return Object.fromEntries(manifest.map((plugin) => [plugin.name, TEST_PLUGIN_SETTINGS[plugin.name] ?? {}]));
}

export async function buildTestApp(t: TapLike, options: TestAppOptions = {}): Promise<TestApp> {
  const ownerToken = options.config?.bootstrap?.ownerToken ?? generateToken(SESSION_PREFIX);
  const manifest = options.manifest ?? defaultManifest;
  // The service's own files (the billing journal, when the database outlives the process) stay out of the working tree.
  const dataDir = mkdtempSync(join(tmpdir(), 'svc-test-data-'));
  const raw: AppConfigInput = {
    ...options.config,
    server: { logLevel: 'silent', ...options.config?.server },
    storage: { dataDir, database: { driver: 'pglite', dataDir: 'memory://' }, coordination: { driver: 'memory' }, ...options.config?.storage },
    bootstrap: { printOwnerToken: false, ...options.config?.bootstrap, ownerToken },
    plugins: options.plugins ?? options.config?.plugins ?? allPlugins(manifest),
  };
  const config = parseConfig(raw);
  const app = await buildApp(config, {
    manifest,
    clock: options.clock,
    logStream: options.logStream,
    random: options.random,
    deriveKey: options.deriveKey,
    outboundLookup: options.outboundLookup,
  });
  // Every error an operation answers must be declared (or implied): see core/operations/operation-errors.ts.
  app.svc.container.resolve(Tokens.Operations).checkDeclaredErrors = true;
  t.teardown(async () => {
    await app.close();
    rmSync(dataDir, { recursive: true, force: true });
  });
  if (options.ready !== false) await app.ready();
  const bootstrap = app.svc.bootstrap;
  const organizationId = bootstrap?.organizationId ?? '';
  const defaultProjectId = bootstrap?.projectId ?? '';
  return {
    app,
    config,
    ownerToken,
    organizationId,
    defaultProjectId,
    call(method, url, callOptions = {}) {
      const token = callOptions.token === undefined ? ownerToken : callOptions.token;
      return app.inject({
        method: method as 'GET',
        url,
        headers: { ...(token ? { authorization: `Bearer ${token}` } : {}), ...callOptions.headers },
        ...(callOptions.body !== undefined ? { payload: callOptions.body as object } : {}),
      });
    },
  };
}

/** Storage config for the real servers when CI provides them: a fresh schema and key prefix. */
export function realServersConfig(): {
  storage: AppConfigInput['storage'];
  /** The key sealing customers' secrets: on PostgreSQL a deployment names its own (SVC_SECRET_KEYS). */
  secrets: AppConfigInput['secrets'];
  schema: string;
  prefix: string;
  dropSchema(): Promise<void>;
} | null {
  const pgUrl = testPgUrl();
  const redisUrl = process.env.TEST_REDIS_URL;
  if (!pgUrl || !redisUrl) return null;
  const schema = randomSchemaName();
  const prefix = `test:${schema}:`;
  return {
    schema,
    prefix,
    dropSchema: () => dropSchema(pgUrl, schema),
    secrets: { keys: [`test:${randomBytes(32).toString('base64')}`] },
    storage: {
      database: { driver: 'postgres', url: pgUrl, schema, poolSize: 5 },
      // Admissions wait out the window only for a replica that does not report after a loss: long
      // enough that a loaded machine's replicas all report in time.
      coordination: { driver: 'redis', url: redisUrl, keyPrefix: prefix, recoveryWindowMs: 2_000 },
    },
  };
}

/**
 * Two replicas of one deployment on the real servers (one schema, one key prefix), dropped when the
 * test ends. Credentials are cached for 60 s, so a refusal seen on one replica soon after a change on
 * the other can only have come from the pushed invalidation, not from the cache expiring.
 */
export async function twoReplicasPushingInvalidations(t: TapLike, servers: NonNullable<ReturnType<typeof realServersConfig>>): Promise<[TestApp, TestApp]> {
  t.teardown(() => servers.dropSchema());
  const ownerToken = generateToken(SESSION_PREFIX);
  const config = { storage: servers.storage, auth: { credentialCacheTtlMs: 60_000 }, bootstrap: { ownerToken } };
  return [await buildTestApp(t, { config }), await buildTestApp(t, { config })];
}

/** Creates a key through the API as the owner and returns its plaintext and id. */
export async function createKey(test: TestApp, body: Record<string, unknown> = {}, token?: string): Promise<{ id: string; key: string; body: Record<string, unknown> }> {
  const response = await test.call('POST', '/client/keys', { token, body: { name: 'test key', ...body } });
  if (response.statusCode !== 201) throw new Error(`key creation failed: ${response.statusCode} ${response.body}`);
  const created = response.json() as { id: string; key: string };
  return { id: created.id, key: created.key, body: created as unknown as Record<string, unknown> };
}

/** Adds a person to the test organisation with a role and returns a session token for them. */
export async function addPerson(test: TestApp, input: { role: 'owner' | 'admin' | 'member'; email?: string; name?: string }): Promise<{ personId: string; token: string }> {
  const identity = test.app.svc.container.resolve(Tokens.Identity);
  const email = input.email ?? `${input.role}-${Math.random().toString(36).slice(2)}@example.com`;
  const person = await addPersonTo(identity, { organizationId: test.organizationId, email, name: input.name ?? email, role: input.role });
  const { token } = await issueSession(identity, { personId: person.id, ttlDays: 1, now: new Date() });
  return { personId: person.id, token };
}

/** Resolves with the next invalidation a replica hears (its authenticator subscribed first, so it has applied it). */
export async function nextInvalidation(app: FastifyInstance): Promise<() => Promise<void>> {
  const pubsub = app.svc.container.resolve(Tokens.Coordination).pubsub;
  let heard!: () => void;
  const arrived = new Promise<void>((resolve) => (heard = resolve));
  const unsubscribe = await pubsub.subscribe('credentials:invalidate', () => heard());
  return async () => {
    await arrived;
    await unsubscribe();
  };
}
