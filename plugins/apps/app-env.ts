import { ApiError } from '../../core/kernel/errors.ts';
import type { Queryable } from '../../core/ports/database.ts';
import type { SecretVault } from '../../core/services/secret-vault.ts';

const OWNER_KIND = 'apps.service';
const NAME = 'env';
const GATEWAY_KEY = 'gateway-key';

/** The variables the service sets itself: read-only, always present (spec: Environment view). */
export const MANAGED_ENV_NAMES = ['SVC_API_KEY', 'SVC_BASE_URL', 'SVC_MCP_URL'] as const;

/** A variable name an env file carries: letters, digits and underscores, not starting with a digit. */
export const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]{0,127}$/;

/** Names the service sets itself: `PORT`, every `SVC_*` (the managed ones and any later). */
export function reservedEnvName(name: string): string | null {
  if (name === 'PORT') return 'PORT is set by the service: the app listens on the PORT it is given';
  if (name.startsWith('SVC_')) return `${name}: SVC_* variables are the service’s own (${MANAGED_ENV_NAMES.join(', ')})`;
  return null;
}

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/**
 * Why an environment cannot carry `value`, or null: a NUL byte (the kernel's environment is NUL-terminated
 * strings, so everything after it would be lost) or a lone UTF-16 surrogate (no UTF-8 spelling).
 */
export function invalidEnvValue(value: string): string | null {
  if (value.includes('\u0000')) return 'a NUL byte cannot be carried by an environment variable';
  if (LONE_SURROGATE.test(value)) return 'the value is not valid Unicode (a lone surrogate): it has no UTF-8 spelling';
  return null;
}

/** The error codes `assertEnvVars` answers: every operation that takes variables declares them. */
export const ENV_REFUSALS = ['reserved_env_name', 'invalid_env_value'] as const;

/** 400 for the first variable the service sets itself or an environment cannot carry, at `<field>.<NAME>`. */
export function assertEnvVars(vars: Readonly<Record<string, string>>, field = 'env'): void {
  for (const [name, value] of Object.entries(vars)) {
    const reserved = reservedEnvName(name);
    if (reserved) throw new ApiError('reserved_env_name', reserved, { param: `${field}.${name}` });
    const invalid = invalidEnvValue(value);
    if (invalid) throw new ApiError('invalid_env_value', invalid, { param: `${field}.${name}` });
  }
}

/** The app's own gateway key as the runtime hands it over: its id and its plaintext. */
export interface GatewayKeySecret {
  keyId: string;
  token: string;
}

/**
 * A service's variables, sealed in the secret vault as one JSON object (values are secrets: API keys,
 * database URLs), and its app's own gateway key (`SVC_API_KEY`) beside them. The vault's version of
 * the variables is the optimistic version env changes compare and swap (0: none stored yet), so two
 * changes read from the same version cannot both be written.
 */
export class AppEnv {
  constructor(private readonly vault: SecretVault) {}

  /** The variables given at deploy (nothing stored when there are none). */
  async write(tx: Queryable, serviceId: string, env: Readonly<Record<string, string>>): Promise<void> {
    if (Object.keys(env).length === 0) return;
    await this.vault.within(tx).put({ kind: OWNER_KIND, id: serviceId }, NAME, JSON.stringify(env));
  }

  async read(serviceId: string): Promise<Record<string, string>> {
    return (await this.readVersioned(serviceId)).vars;
  }

  /** The variables with the version they were read at. */
  async readVersioned(serviceId: string, db?: Queryable): Promise<{ vars: Record<string, string>; version: number }> {
    const vault = db ? this.vault.within(db) : this.vault;
    const stored = await vault.get({ kind: OWNER_KIND, id: serviceId }, NAME);
    return stored ? { vars: JSON.parse(stored.value.reveal()) as Record<string, string>, version: stored.ref.version } : { vars: {}, version: 0 };
  }

  /** Replaces the variables if they are still at `expectedVersion`; the new version, or null when another change won. */
  async replace(tx: Queryable, serviceId: string, vars: Readonly<Record<string, string>>, expectedVersion: number): Promise<number | null> {
    const ref = await this.vault.within(tx).put({ kind: OWNER_KIND, id: serviceId }, NAME, JSON.stringify(vars), { expectedVersion });
    return ref?.version ?? null;
  }

  async names(serviceId: string): Promise<string[]> {
    return Object.keys(await this.read(serviceId));
  }

  async gatewayKey(serviceId: string): Promise<GatewayKeySecret | null> {
    const stored = await this.vault.get({ kind: OWNER_KIND, id: serviceId }, GATEWAY_KEY);
    return stored ? (JSON.parse(stored.value.reveal()) as GatewayKeySecret) : null;
  }

  async putGatewayKey(tx: Queryable, serviceId: string, key: GatewayKeySecret): Promise<void> {
    await this.vault.within(tx).put({ kind: OWNER_KIND, id: serviceId }, GATEWAY_KEY, JSON.stringify(key));
  }

  /** Forgets the services' variables and gateway keys (in the transaction deleting them). */
  async forget(tx: Queryable, serviceIds: readonly string[]): Promise<void> {
    if (serviceIds.length > 0) await this.vault.within(tx).deleteOwners(OWNER_KIND, serviceIds);
  }
}

/**
 * What a service runs with: its stored variables plus the managed ones, `SVC_API_KEY` (the app's own
 * key), `SVC_BASE_URL` (`<gateway>/v1`) and `SVC_MCP_URL` (`<gateway>/mcp/gateway`). Read at every
 * start (deploy, env change, start after stop); the stored variables never hold a managed name.
 */
export class RuntimeEnv {
  constructor(
    private readonly env: AppEnv,
    /** The gateway's address as apps reach it, read at each start: `server.publicUrl`, else where it listens. */
    private readonly gatewayUrl: () => string,
  ) {}

  managed(key: GatewayKeySecret | null): Record<(typeof MANAGED_ENV_NAMES)[number], string | null> {
    const base = this.gatewayUrl().replace(/\/+$/, '');
    return { SVC_API_KEY: key?.token ?? null, SVC_BASE_URL: `${base}/v1`, SVC_MCP_URL: `${base}/mcp/gateway` };
  }

  async of(serviceId: string, vars?: Readonly<Record<string, string>>): Promise<Record<string, string>> {
    const stored = vars ?? (await this.env.read(serviceId));
    const managed = this.managed(await this.env.gatewayKey(serviceId));
    const present = Object.fromEntries(Object.entries(managed).filter((entry): entry is [string, string] => entry[1] !== null));
    return { ...stored, ...present };
  }
}
