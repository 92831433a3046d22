import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { parse as parseYaml } from 'yaml';
import type { z } from 'zod';
import { configSchema, type AppConfig } from './schema.ts';

/**
 * The only module that reads the process environment. Everything else receives the parsed,
 * validated AppConfig.
 */
export class ConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ConfigError';
  }
}

/** Relative to the working directory, like ./data: `npm start` and `npm run start:prod` run from the project root. */
export const DEFAULT_CONFIG_PATH = resolve('config/default.yaml');

type Env = Record<string, string | undefined>;

export interface LoadOptions {
  /** Config file; defaults to SVC_CONFIG, then config/default.yaml. */
  path?: string;
  env?: Env;
  /** The service's command-line arguments (main.ts passes its own); `--role` wins over SVC_ROLE and the file. */
  argv?: readonly string[];
}

export function loadConfig(options: LoadOptions = {}): AppConfig {
  const env = options.env ?? process.env;
  const path = options.path ?? env.SVC_CONFIG ?? DEFAULT_CONFIG_PATH;
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (error) {
    throw new ConfigError(`config: cannot read ${path}: ${(error as Error).message}`);
  }
  let raw: unknown;
  try {
    raw = parseYaml(text) ?? {};
  } catch (error) {
    throw new ConfigError(`config: ${path} is not valid YAML: ${(error as Error).message.split('\n')[0]}`);
  }
  return parseConfig(raw, env, options.argv);
}

/** Validates an already-read config object (tests build these in code). */
export function parseConfig(raw: unknown, env: Env = {}, argv: readonly string[] = []): AppConfig {
  const interpolated = interpolate(raw, env, []);
  const withOverrides = applyOtelEnvironment(applyEnvOverrides(interpolated, { ...env, ...commandLine(argv) }), env);
  const parsed = configSchema.safeParse(withOverrides);
  if (!parsed.success) throw new ConfigError(describeIssue(parsed.error.issues[0]));
  return parsed.data;
}

/** One line naming the field, for a boot failure the operator can act on. */
export function describeIssue(issue: z.core.$ZodIssue | undefined, prefix: readonly PropertyKey[] = []): string {
  if (!issue) return 'config: invalid';
  const path = [...prefix, ...issue.path];
  const where = path.length ? path.map(String).join('.') : '(top level)';
  if (issue.code === 'unrecognized_keys') {
    const keys = issue.keys.map((k) => [...path, k].map(String).join('.'));
    return `config: unknown field ${keys.join(', ')}`;
  }
  return `config: ${where}: ${issue.message}`;
}

/**
 * The service's arguments, as the environment variables they stand for: `--role api|worker|all`
 * (or `--role=…`) is SVC_ROLE, `--queues a,b.*` SVC_JOB_QUEUES. Anything else stops the boot rather than being silently ignored.
 */
function commandLine(argv: readonly string[]): Env {
  const out: Env = {};
  for (let i = 0; i < argv.length; i += 1) {
    const arg = argv[i]!;
    const equals = arg.indexOf('=');
    const [flag, inline] = arg.startsWith('--') && equals !== -1 ? [arg.slice(0, equals), arg.slice(equals + 1)] : [arg, undefined];
    if (flag !== '--role' && flag !== '--queues') {
      throw new ConfigError(`config: unknown argument ${JSON.stringify(arg)} (the service takes --role api|worker|all and --queues NAME,…)`);
    }
    const value = inline ?? argv[(i += 1)];
    if (flag === '--queues') {
      if (value === undefined || value === '') throw new ConfigError('config: --queues needs a value: queue names or prefixes.*, comma-separated');
      out.SVC_JOB_QUEUES = value;
      continue;
    }
    if (value === undefined || value === '') throw new ConfigError('config: --role needs a value: api, worker or all');
    out.SVC_ROLE = value;
  }
  return out;
}

const PLACEHOLDER = /\$\{([A-Z0-9_]+)(?::-([^}]*))?\}/g;

/** Replaces ${VAR} and ${VAR:-default} in every string value, so secrets stay out of the file. */
function interpolate(value: unknown, env: Env, path: string[]): unknown {
  if (typeof value === 'string') {
    return value.replace(PLACEHOLDER, (_match, name: string, fallback: string | undefined) => {
      const found = env[name];
      if (found !== undefined && found !== '') return found;
      if (fallback !== undefined) return fallback;
      throw new ConfigError(`config: ${path.join('.') || '(top level)'}: environment variable ${name} is not set`);
    });
  }
  if (Array.isArray(value)) return value.map((item, i) => interpolate(item, env, [...path, String(i)]));
  if (value && typeof value === 'object') {
    const out: Record<string, unknown> = {};
    for (const [key, item] of Object.entries(value)) out[key] = interpolate(item, env, [...path, key]);
    return out;
  }
  return value;
}

const isMapping = (value: unknown): value is Record<string, unknown> => value !== null && typeof value === 'object' && !Array.isArray(value);

/** A section to merge overrides into; anything that is not a mapping is left for the schema to refuse. */
function section(config: Record<string, unknown>, name: string): Record<string, unknown> | null {
  const value = config[name];
  if (value === undefined || value === null) return {};
  return isMapping(value) ? { ...value } : null;
}

/** PORT, HOST, SVC_ROLE, SVC_WORKERS, SVC_JOB_QUEUES, SVC_DATA_DIR, DATABASE_URL, REDIS_URL, LOG_LEVEL, SVC_OWNER_TOKEN, SVC_SECRET_KEYS win over the file. */
function applyEnvOverrides(raw: unknown, env: Env): unknown {
  if (raw !== undefined && raw !== null && !isMapping(raw)) {
    throw new ConfigError('config: (top level): expected a mapping of sections (server, storage, plugins, …)');
  }
  const config: Record<string, unknown> = { ...(raw ?? {}) };
  const server = section(config, 'server');
  if (!server) return config;
  if (env.PORT) {
    const port = Number(env.PORT);
    if (!Number.isInteger(port)) throw new ConfigError(`config: PORT: expected an integer, got ${JSON.stringify(env.PORT)}`);
    server.port = port;
  }
  if (env.HOST) server.host = env.HOST;
  if (env.LOG_LEVEL) server.logLevel = env.LOG_LEVEL;
  if (env.SVC_ROLE) server.role = env.SVC_ROLE;
  if (env.SVC_WORKERS) {
    const workers = env.SVC_WORKERS.trim() === 'auto' ? 'auto' : Number(env.SVC_WORKERS);
    if (workers !== 'auto' && !Number.isInteger(workers)) {
      throw new ConfigError(`config: SVC_WORKERS: expected an integer or auto, got ${JSON.stringify(env.SVC_WORKERS)}`);
    }
    server.workers = workers;
  }
  config.server = server;

  const storage = section(config, 'storage');
  if (!storage) return config;
  if (env.SVC_DATA_DIR) storage.dataDir = resolve(env.SVC_DATA_DIR);
  if (env.DATABASE_URL) {
    storage.database = { driver: 'postgres', url: env.DATABASE_URL };
  } else if (env.SVC_DATA_DIR) {
    const database = section(storage, 'database');
    if (database && (database.driver ?? 'pglite') === 'pglite') {
      storage.database = { ...database, driver: 'pglite', dataDir: resolve(env.SVC_DATA_DIR, 'pglite') };
    }
  }
  if (env.REDIS_URL) storage.coordination = { driver: 'redis', url: env.REDIS_URL };
  config.storage = storage;

  if (env.SVC_SECRET_KEYS) {
    const secrets = section(config, 'secrets');
    if (secrets) config.secrets = { ...secrets, keys: env.SVC_SECRET_KEYS.split(/[\s,]+/).filter((key) => key !== '') };
  }

  if (env.SVC_JOB_QUEUES) {
    const jobs = section(config, 'jobs');
    if (jobs) config.jobs = { ...jobs, queues: env.SVC_JOB_QUEUES.split(/[\s,]+/).filter((name) => name !== '') };
  }

  const bootstrap = section(config, 'bootstrap');
  if (env.SVC_OWNER_TOKEN && bootstrap) config.bootstrap = { ...bootstrap, ownerToken: env.SVC_OWNER_TOKEN };
  return config;
}

/**
 * The OpenTelemetry SDK's own variables (https://opentelemetry.io/docs/specs/otel/configuration/sdk-environment-variables/,
 * …/protocol/exporter/) for the `tracing` section, winning over the file as the variables above do:
 * OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is used as it is, OTEL_EXPORTER_OTLP_ENDPOINT is a base that
 * gets `v1/traces`; OTEL_EXPORTER_OTLP_HEADERS then …_TRACES_HEADERS add headers
 * (`key=value,…`, values percent-encoded); OTEL_SERVICE_NAME names the service; OTEL_SDK_DISABLED=true turns tracing off.
 */
function applyOtelEnvironment(raw: unknown, env: Env): unknown {
  if (!isMapping(raw)) return raw;
  const tracing = section(raw, 'tracing');
  if (!tracing) return raw;
  const traces = env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT;
  const base = env.OTEL_EXPORTER_OTLP_ENDPOINT;
  if (traces) tracing.otlpEndpoint = traces;
  else if (base) tracing.otlpEndpoint = `${base}${base.endsWith('/') ? '' : '/'}v1/traces`;
  if (env.OTEL_SERVICE_NAME) tracing.serviceName = env.OTEL_SERVICE_NAME;
  if (env.OTEL_SDK_DISABLED?.trim().toLowerCase() === 'true') tracing.enabled = false;
  const headers = {
    ...otelHeaders(env, 'OTEL_EXPORTER_OTLP_HEADERS'),
    ...otelHeaders(env, 'OTEL_EXPORTER_OTLP_TRACES_HEADERS'),
  };
  if (Object.keys(headers).length > 0) tracing.headers = { ...(isMapping(tracing.headers) ? tracing.headers : {}), ...headers };
  return { ...raw, tracing };
}

/** `key=value` pairs separated by commas, values percent-decoded, as the OTLP exporter specification has them. */
function otelHeaders(env: Env, name: string): Record<string, string> {
  const text = env[name];
  const headers: Record<string, string> = {};
  if (!text) return headers;
  for (const pair of text.split(',')) {
    if (pair.trim() === '') continue;
    const equals = pair.indexOf('=');
    const key = pair.slice(0, equals).trim();
    let value: string;
    try {
      value = decodeURIComponent(pair.slice(equals + 1).trim());
    } catch {
      value = '';
    }
    // Never the value in the message: it is usually a collector's key.
    if (equals <= 0 || key === '' || value === '') throw new ConfigError(`config: ${name}: expected key=value pairs separated by commas`);
    headers[key.toLowerCase()] = value;
  }
  return headers;
}
