import { CheckViolation, DatabaseError, DatabaseUnavailable, ForeignKeyViolation, SerializationFailure, UniqueViolation } from '../../core/ports/database.ts';

/**
 * The one place SQLSTATEs are read. Both drivers (pg and PGlite) raise PostgreSQL's server errors
 * with `code` and `constraint`; each adapter passes whatever its driver threw through here, so the
 * rest of the code matches classes (core/ports/database.ts) instead of five-character codes.
 */
export function translateDatabaseError(error: unknown): unknown {
  if (!(error instanceof Error) || error instanceof DatabaseError) return error;
  const { code, constraint } = error as { code?: unknown; constraint?: unknown };
  const named = { sqlState: typeof code === 'string' ? code : null, cause: error, constraint: typeof constraint === 'string' ? constraint : null };
  switch (code) {
    case '23505':
      return new UniqueViolation(error.message, named);
    case '23503':
      return new ForeignKeyViolation(error.message, named);
    case '23514':
      return new CheckViolation(error.message, named);
    case '40001':
    case '40P01':
      return new SerializationFailure(error.message, named);
    default:
      break;
  }
  if (isUnavailable(error, code)) return new DatabaseUnavailable(error.message, named);
  return error;
}

/** Runs a driver call and rethrows its failure translated. */
export async function translated<T>(call: Promise<T>): Promise<T> {
  try {
    return await call;
  } catch (error) {
    throw translateDatabaseError(error);
  }
}

// Connection exceptions (class 08), admin/crash shutdown and "cannot connect now" (57P01-57P03),
// and the sockets under them.
const UNAVAILABLE_CODES = new Set(['57P01', '57P02', '57P03', 'ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'ENOTFOUND', 'EAI_AGAIN']);
// pg: a connection cut mid-query, a pool or client already ended, a connect timeout; PGlite: closed.
const UNAVAILABLE_MESSAGE = /connection terminated|pool after calling end|client was closed|not queryable|timeout exceeded when trying to connect|pglite is closed/i;

function isUnavailable(error: Error, code: unknown): boolean {
  if (typeof code === 'string' && (UNAVAILABLE_CODES.has(code) || code.startsWith('08'))) return true;
  return UNAVAILABLE_MESSAGE.test(error.message);
}
