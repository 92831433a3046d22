import { catalogueEntries } from '../../core/kernel/error-catalogue.ts';
import { type RequestLogErrorCode, UNANSWERED_CALL_CODES } from '../../core/ports/metering.ts';

let known: ReadonlySet<string> = new Set();

/**
 * A call's error code as the request log types it: a catalogued code or one of
 * UNANSWERED_CALL_CODES; null for a code nobody catalogued (the caller logs it: a row with a code
 * no one can look up tells its reader nothing). Codes are catalogued as their modules load, so a
 * code not seen yet re-reads the catalogue once.
 */
export function requestLogErrorCode(code: string): RequestLogErrorCode | null {
  if (!known.has(code)) known = new Set<string>([...catalogueEntries().map((entry) => entry.code), ...UNANSWERED_CALL_CODES]);
  return known.has(code) ? (code as RequestLogErrorCode) : null;
}
