import { createHash } from 'node:crypto';
import type { Database, Migration, Queryable } from '../../core/ports/database.ts';
import { canRunScripts, type ScriptQueryable } from './script-runner.ts';

export interface AppliedMigration {
  owner: string;
  version: number;
  name: string;
}

export interface RunMigrationsOptions {
  /** Base of the advisory lock key; the current schema name is mixed in (see lockKeyFor). */
  lockKey?: bigint | number;
}

export class MigrationError extends Error {
  readonly owner: string;
  readonly version: number;
  readonly migrationName: string;

  constructor(migration: Pick<Migration, 'owner' | 'version' | 'name'>, message: string, cause?: unknown) {
    super(message, cause === undefined ? undefined : { cause });
    this.name = 'MigrationError';
    this.owner = migration.owner;
    this.version = migration.version;
    this.migrationName = migration.name;
  }
}

/** ASCII "svc-migr": an arbitrary constant so our lock does not collide with other advisory-lock users. */
const DEFAULT_LOCK_KEY = 0x7376632d6d696772n;

const CREATE_TABLE = `CREATE TABLE IF NOT EXISTS schema_migrations (
  owner text NOT NULL,
  version integer NOT NULL,
  name text NOT NULL,
  checksum text NOT NULL,
  applied_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (owner, version)
)`;

interface PlannedMigration extends Migration {
  checksum: string;
}

interface AppliedRow {
  owner: string;
  version: number;
  checksum: string;
}

function label(m: Pick<Migration, 'owner' | 'version' | 'name'>): string {
  return `${m.owner}@${m.version} (${m.name})`;
}

export function migrationChecksum(sql: string): string {
  return createHash('sha256').update(sql, 'utf8').digest('hex');
}

/**
 * The schema is part of the key so runners in different schemas of one database (parallel test
 * schemas, several tenants) do not queue behind each other, while replicas sharing a schema do.
 */
export function lockKeyFor(base: bigint | number, schema: string): bigint {
  if (typeof base === 'number' && !Number.isSafeInteger(base)) {
    throw new Error(`lockKey must be an integer, got ${base}`);
  }
  const digest = createHash('sha256')
    .update(`${BigInt.asIntN(64, BigInt(base))}\0${schema}`, 'utf8')
    .digest();
  return digest.readBigInt64BE(0);
}

/** Owners in order of first appearance, each owner's migrations by ascending version. */
function plan(migrations: readonly Migration[]): PlannedMigration[] {
  const byOwner = new Map<string, Migration[]>();
  const seen = new Set<string>();
  for (const m of migrations) {
    if (typeof m.owner !== 'string' || m.owner === '') throw new MigrationError(m, `migration ${label(m)} has no owner`);
    if (!Number.isInteger(m.version) || m.version < 0 || m.version > 0x7fffffff) {
      throw new MigrationError(m, `migration ${label(m)} has an invalid version (a non-negative int4 is required)`);
    }
    const id = `${m.owner}\0${m.version}`;
    if (seen.has(id)) throw new MigrationError(m, `migration ${label(m)} is listed twice (same owner and version)`);
    seen.add(id);
    let list = byOwner.get(m.owner);
    if (list === undefined) byOwner.set(m.owner, (list = []));
    list.push(m);
  }
  const ordered: PlannedMigration[] = [];
  for (const list of byOwner.values()) {
    list.sort((a, b) => a.version - b.version);
    for (const m of list) ordered.push({ ...m, checksum: migrationChecksum(m.sql) });
  }
  return ordered;
}

function checkUnchanged(m: PlannedMigration, stored: string): void {
  if (stored !== m.checksum && !m.formerChecksums?.includes(stored)) {
    throw new MigrationError(
      m,
      `migration ${label(m)} was already applied with different SQL (stored checksum ${stored.slice(0, 12)}…, ` +
        `now ${m.checksum.slice(0, 12)}…); applied migrations must never be edited, add a new version instead`,
    );
  }
}

function scriptRunner(tx: Queryable): ScriptQueryable {
  if (!canRunScripts(tx)) {
    throw new Error('this Database adapter cannot run multi-statement migration scripts (its tx has no exec)');
  }
  return tx;
}

/**
 * Applies pending migrations, each in its own transaction that also holds a transaction-level
 * advisory lock.
 *
 * Why one transaction per migration rather than one for the whole run: a migration that fails
 * leaves the earlier ones committed, so a restart resumes instead of redoing everything, and
 * statements whose effect must be committed before later ones can use it (ALTER TYPE … ADD VALUE)
 * work across migrations. Concurrency stays safe because every transaction takes the same lock
 * and re-reads schema_migrations after getting it: a second replica waits, then finds each
 * migration already recorded and applies nothing.
 *
 * Migration SQL must not contain its own BEGIN/COMMIT (it runs inside ours), and cannot use
 * statements that refuse transactions (CREATE INDEX CONCURRENTLY).
 */
export async function runMigrations(db: Database, migrations: readonly Migration[], options: RunMigrationsOptions = {}): Promise<{ applied: AppliedMigration[] }> {
  const ordered = plan(migrations);
  const base = options.lockKey ?? DEFAULT_LOCK_KEY;
  let lockKey: bigint | undefined;

  const lock = async (tx: Queryable): Promise<void> => {
    if (lockKey === undefined) {
      const { rows } = await tx.query<{ schema: string | null }>('SELECT current_schema() AS schema');
      const schema = rows[0]?.schema;
      if (schema == null) throw new Error('no current schema: the search_path names no existing schema');
      lockKey = lockKeyFor(base, schema);
    }
    await tx.query('SELECT pg_advisory_xact_lock($1::bigint)', [lockKey]);
  };

  // Verify every already-applied migration before touching anything, so an edited migration
  // stops the run even when it is not the next one to apply.
  const pending = await db.transaction(async (tx) => {
    await lock(tx);
    await tx.query(CREATE_TABLE);
    const { rows } = await tx.query<AppliedRow>('SELECT owner, version, checksum FROM schema_migrations');
    const stored = new Map(rows.map((r) => [`${r.owner}\0${r.version}`, r.checksum]));
    const highest = new Map<string, number>();
    for (const r of rows) highest.set(r.owner, Math.max(highest.get(r.owner) ?? -1, r.version));
    const todo: PlannedMigration[] = [];
    for (const m of ordered) {
      const checksum = stored.get(`${m.owner}\0${m.version}`);
      if (checksum !== undefined) {
        checkUnchanged(m, checksum);
        continue;
      }
      const top = highest.get(m.owner);
      if (top !== undefined && m.version < top) {
        throw new MigrationError(m, `migration ${label(m)} is not applied but ${m.owner}@${top} already is; versions must be added in ascending order`);
      }
      todo.push(m);
    }
    return todo;
  });

  const applied: AppliedMigration[] = [];
  for (const m of pending) {
    let didApply = false;
    try {
      didApply = await db.transaction(async (tx) => {
        await lock(tx);
        const { rows } = await tx.query<{ checksum: string }>('SELECT checksum FROM schema_migrations WHERE owner = $1 AND version = $2', [m.owner, m.version]);
        const existing = rows[0];
        if (existing !== undefined) {
          checkUnchanged(m, existing.checksum);
          return false;
        }
        await scriptRunner(tx).exec(m.sql);
        await tx.query('INSERT INTO schema_migrations (owner, version, name, checksum) VALUES ($1, $2, $3, $4)', [m.owner, m.version, m.name, m.checksum]);
        return true;
      });
    } catch (err) {
      if (err instanceof MigrationError) throw err;
      const reason = err instanceof Error ? err.message : String(err);
      throw new MigrationError(m, `migration ${label(m)} failed and was rolled back: ${reason}`, err);
    }
    if (didApply) applied.push({ owner: m.owner, version: m.version, name: m.name });
  }
  return { applied };
}
