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
}

/**
 * Applies the migrations not yet recorded, in order, safely against replicas doing the same
 * (adapters/sql/migrator.ts). The kernel runs it at start over its own and its plugins' migrations.
 */
export type Migrator = (db: Database, migrations: readonly Migration[]) => Promise<unknown>;
