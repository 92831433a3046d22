import pg from 'pg';
import type { CustomTypesConfig, PoolClient, QueryConfig, QueryResult as PgQueryResult } from 'pg';
import type { Database, QueryResult, Transaction } from '../../core/ports/database.ts';
import { translated, translateDatabaseError } from '../sql/database-errors.ts';
import { abortedCommitError, quoteIdentifier, runAfterCommit, type ScriptQueryable } from '../sql/script-runner.ts';

export interface PgDatabaseOptions {
  url: string;
  /** Every connection runs with search_path set to this schema only; it is created if missing. */
  schema?: string;
  poolSize?: number;
  applicationName?: string;
  /**
   * Called when an idle pooled connection dies (server restart, network cut). The pool already
   * drops the connection; without a listener pg would raise an uncaught 'error' and kill the process.
   */
  onConnectionError?: (err: Error) => void;
}

const INT8_OID = 20;
const INT8_ARRAY_OID = 1016;

function toBigInts(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(toBigInts);
  return typeof value === 'string' ? BigInt(value) : value;
}

/**
 * Per-pool parser table: money columns are int8 micro-USD and must not lose precision, but
 * pg.types.setTypeParser would change every other pg user in the process, so the override is
 * handed to this pool's clients only.
 */
const builtinParser = pg.types.getTypeParser as (oid: number, format?: 'text' | 'binary') => (value: string) => unknown;
const parseInt8TextArray = builtinParser(INT8_ARRAY_OID, 'text');

const typeOverrides: CustomTypesConfig = {
  getTypeParser: ((oid: number, format?: 'text' | 'binary') => {
    if (format !== 'binary') {
      if (oid === INT8_OID) return (text: string) => BigInt(text);
      if (oid === INT8_ARRAY_OID) return (text: string) => toBigInts(parseInt8TextArray(text));
    }
    return builtinParser(oid, format);
  }) as CustomTypesConfig['getTypeParser'],
};

/** Escapes a value for the libpq `options` string, which the server splits on unescaped whitespace. */
function escapeOptionValue(value: string): string {
  return value.replace(/[\\\s]/g, (c) => `\\${c}`);
}

/**
 * A connection string's own `?options=` would replace (not extend) the `options` we pass, silently
 * dropping search_path, so it is moved out of the URL and merged.
 */
function splitOptionsFromUrl(url: string): { url: string; options: string | undefined } {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return { url, options: undefined };
  }
  const options = parsed.searchParams.get('options');
  if (options === null) return { url, options: undefined };
  parsed.searchParams.delete('options');
  return { url: parsed.toString(), options };
}

function toResult<R>(result: PgQueryResult): QueryResult<R> {
  return { rows: result.rows as R[], rowCount: result.rowCount ?? 0 };
}

/**
 * Always the extended protocol, even without parameters: pg would otherwise use the simple
 * protocol, which accepts several statements and then returns an array of results. PGlite's
 * query() never does, so both backends agree that query() is exactly one statement.
 */
function singleStatement(sql: string, params: readonly unknown[] | undefined): QueryConfig {
  const config: QueryConfig & { queryMode: 'extended' } = {
    text: sql,
    values: params === undefined ? [] : [...params],
    queryMode: 'extended',
  };
  return config;
}

const ignoreError = (): void => {};

export async function createPgDatabase(options: PgDatabaseOptions): Promise<Database & ScriptQueryable> {
  const fromUrl = splitOptionsFromUrl(options.url);
  const serverOptions = [fromUrl.options];
  if (options.schema !== undefined) {
    serverOptions.push(`-c search_path=${escapeOptionValue(quoteIdentifier(options.schema))}`);
  }
  const joinedOptions = serverOptions.filter((o) => o !== undefined && o !== '').join(' ');

  const pool = new pg.Pool({
    connectionString: fromUrl.url,
    max: options.poolSize ?? 10,
    types: typeOverrides,
    ...(joinedOptions === '' ? {} : { options: joinedOptions }),
    ...(options.applicationName === undefined ? {} : { application_name: options.applicationName }),
  });
  pool.on('error', (err) => options.onConnectionError?.(err));

  try {
    if (options.schema === undefined) {
      await pool.query('SELECT 1');
    } else {
      await pool.query(`CREATE SCHEMA IF NOT EXISTS ${quoteIdentifier(options.schema)}`).catch((err: unknown) => {
        // Two replicas creating the same schema at once: IF NOT EXISTS is not atomic in PostgreSQL,
        // the loser gets a unique violation on the catalog although the schema now exists.
        const code = (err as { code?: unknown }).code;
        if (code !== '23505' && code !== '42P06') throw err;
      });
    }
  } catch (err) {
    await pool.end().catch(ignoreError);
    throw translateDatabaseError(err);
  }

  async function transaction<T>(fn: (tx: Transaction) => Promise<T>): Promise<T> {
    const client: PoolClient = await translated(pool.connect());
    // While checked out the pool's own error listener is detached; a connection dying while the
    // callback awaits something else would otherwise be an uncaught 'error' event.
    const onClientError = (err: Error): void => options.onConnectionError?.(err);
    client.on('error', onClientError);
    let closed = false;
    // A connection whose BEGIN/COMMIT/ROLLBACK failed is in an unknown state: destroy, don't reuse.
    let destroy: Error | undefined;
    const ensureOpen = (): void => {
      if (closed) throw new Error('transaction is already finished; use the Database, not a stale tx');
    };
    const committed: Array<() => void> = [];
    const tx: ScriptQueryable & Transaction = {
      async query<R = Record<string, unknown>>(sql: string, params?: readonly unknown[]) {
        ensureOpen();
        return toResult<R>(await translated(client.query(singleStatement(sql, params))));
      },
      async exec(sql: string) {
        ensureOpen();
        await translated(client.query(sql));
      },
      afterCommit(callback: () => void) {
        ensureOpen();
        committed.push(callback);
      },
    };
    try {
      try {
        await client.query('BEGIN');
      } catch (err) {
        destroy = err as Error;
        throw translateDatabaseError(err);
      }
      let result: T;
      try {
        result = await fn(tx);
      } catch (err) {
        closed = true;
        try {
          await client.query('ROLLBACK');
        } catch (rollbackErr) {
          destroy = rollbackErr as Error;
        }
        throw err;
      }
      closed = true;
      let commit: PgQueryResult;
      try {
        commit = await client.query('COMMIT');
      } catch (err) {
        destroy = err as Error;
        throw translateDatabaseError(err);
      }
      if (commit.command === 'ROLLBACK') throw abortedCommitError();
      runAfterCommit(committed);
      return result;
    } finally {
      closed = true;
      client.removeListener('error', onClientError);
      client.release(destroy);
    }
  }

  return {
    kind: 'postgres',
    async query<R = Record<string, unknown>>(sql: string, params?: readonly unknown[]) {
      return toResult<R>(await translated(pool.query(singleStatement(sql, params))));
    },
    async exec(sql: string) {
      await translated(pool.query(sql));
    },
    transaction,
    async close() {
      if (!pool.ended) await pool.end();
    },
  };
}
