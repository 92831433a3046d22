import type { Queryable } from '../../core/ports/database.ts';

/**
 * A Queryable that can also run a multi-statement SQL script (migrations). Kept out of the core
 * port on purpose: stores must use parameterised single statements, and only the migrator needs
 * the driver's simple-query path (pg: a query without parameters; PGlite: exec).
 */
export interface ScriptQueryable extends Queryable {
  exec(sql: string): Promise<void>;
}

export function canRunScripts(q: Queryable): q is ScriptQueryable {
  return typeof (q as Partial<ScriptQueryable>).exec === 'function';
}

/** Double-quotes an SQL identifier so any schema name (spaces, capitals, quotes) is taken literally. */
export function quoteIdentifier(name: string): string {
  if (name.length === 0 || name.includes('\0')) throw new Error(`invalid SQL identifier ${JSON.stringify(name)}`);
  return `"${name.replaceAll('"', '""')}"`;
}

/**
 * pg counterpart of PGlite's TransactionAbortedError (same SQLSTATE): COMMIT of a transaction in
 * which a statement failed (and the callback swallowed the error) silently rolls back, which must
 * never look like success.
 */
export function abortedCommitError(): Error & { code: string } {
  return Object.assign(new Error('Transaction was rolled back instead of committed: a statement inside it failed and the error was caught'), { code: '25P02' });
}

/** Both adapters' transactions end with this: a failing callback must not turn a commit into an error. */
export function runAfterCommit(callbacks: ReadonlyArray<() => void>): void {
  for (const callback of callbacks) {
    try {
      callback();
    } catch {
      // A nudge that failed costs only latency (see Transaction.afterCommit).
    }
  }
}
