import { z } from 'zod';

/** The ids the API speaks: what a path, a query or a cursor may name. */

/** Organisations, people, projects and API keys: UUIDs the service generates. */
export const resourceId = z.uuid();

/**
 * A request id as the gateway issues it (`req_…`, core/kernel/request-ids.ts) or accepts it from a caller
 * (x-request-id, echoed as x-client-request-id): safe to put in a header, a log line or a URL.
 */
export const REQUEST_ID_PATTERN = /^[A-Za-z0-9._:-]{1,128}$/;

export const requestId = z.string().regex(REQUEST_ID_PATTERN, 'a request id: 1 to 128 letters, digits, or . _ : -');

/** Rows the database numbers itself (bigserial: ledger lines, audit entries), as decimal text. */
export const sequenceId = z.string().regex(/^[1-9]\d{0,17}$/, 'a row number');
