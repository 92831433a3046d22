/**
 * The SQL port. One SQL dialect (PostgreSQL) serves both the embedded default (PGlite) and real
 * PostgreSQL (pg), so stores are written once against this interface: the kernel's in
 * adapters/sql/, a plugin's in its own folder. Parameters use $1, $2… placeholders. bigint
 * parameters are sent as text; bigint/int8 columns come back as JavaScript bigint (money is
 * integer micro-USD).
 */
export interface QueryResult<R> {
  rows: R[];
  rowCount: number;
}

export interface Queryable {
  query<R = Record<string, unknown>>(sql: string, params?: readonly unknown[]): Promise<QueryResult<R>>;
}

/** The Queryable a transaction callback receives. */
export interface Transaction extends Queryable {
  /**
   * Runs fn once the transaction has committed, never if it rolls back. For nudges that must not
   * fire before the data is visible to others (waking a job worker), not for data: fn runs outside
   * the transaction and its errors are ignored.
   */
  afterCommit(fn: () => void): void;
}

export interface Database extends Queryable {
  readonly kind: 'pglite' | 'postgres';
  /** Runs fn in one transaction (BEGIN … COMMIT, ROLLBACK on throw) on one connection. */
  transaction<T>(fn: (tx: Transaction) => Promise<T>): Promise<T>;
  close(): Promise<void>;
}

/** A versioned schema change. Versions are ordered per owner ("core" or a plugin's name). */
export interface Migration {
  owner: string;
  version: number;
  name: string;
  sql: string;
  /**
   * Checksums of SQL this migration had before part of it moved to another owner's migration
   * (which creates what it took over only where it is absent): a database that applied that SQL
   * is up to date with this migration. Applied SQL is otherwise never edited.
   */
  formerChecksums?: readonly string[];
}

/**
 * Applies the migrations not yet recorded, in order, safely against replicas doing the same
 * (adapters/sql/migrator.ts). The kernel runs it at start over its own and its plugins' migrations.
 */
export type Migrator = (db: Database, migrations: readonly Migration[]) => Promise<unknown>;

/**
 * What a database failure means, raised by the adapters (translated from the driver's SQLSTATE,
 * adapters/sql/database-errors.ts) so that nothing outside adapters/ reads PostgreSQL's codes.
 * The driver's own error is kept as `cause`; errors with no meaning worth naming pass through as
 * the driver raised them.
 */
export class DatabaseError extends Error {
  /** The SQLSTATE (or socket code) the driver reported, for logs only: callers match the class. */
  readonly sqlState: string | null;

  constructor(message: string, options: { sqlState?: string | null; cause?: unknown } = {}) {
    super(message, { cause: options.cause });
    this.name = new.target.name;
    this.sqlState = options.sqlState ?? null;
  }
}

/** A constraint the statement broke, by the name the schema gave it (`projects_org_name_key`). */
abstract class ConstraintViolation extends DatabaseError {
  readonly constraint: string | null;

  constructor(message: string, options: { constraint?: string | null; sqlState?: string | null; cause?: unknown } = {}) {
    super(message, options);
    this.constraint = options.constraint ?? null;
  }
}

/** A duplicate in a unique index or primary key (23505): usually a name or key already taken. */
export class UniqueViolation extends ConstraintViolation {}

/** A row refers to one that does not exist, or a referenced row is still in use (23503). */
export class ForeignKeyViolation extends ConstraintViolation {}

/** A CHECK constraint refused the row (23514). */
export class CheckViolation extends ConstraintViolation {}

/** Concurrent transactions collided (serialization failure 40001, deadlock 40P01): retrying the whole transaction may succeed. */
export class SerializationFailure extends DatabaseError {}

/**
 * The database could not be reached or went away (connection class 08, shutdown 57P0x, refused
 * or reset sockets, a closed client): nothing was done, and retrying later may succeed.
 */
export class DatabaseUnavailable extends DatabaseError {}
