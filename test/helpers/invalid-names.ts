import { lookup as systemLookup } from 'node:dns';
import type { LookupFunction } from 'node:net';

type Lookup = (hostname: string, options: unknown, callback: (...args: unknown[]) => void) => void;

/**
 * The system resolver, except that a name under `.invalid` fails at once, as it must (RFC 6761): tests
 * point customers' URLs there so nothing is ever sent. Asked of a resolver that drops a query, such a
 * lookup waited out the outbound connect timeout (5 s), one call in a few, and slow files timed out.
 */
export const invalidNamesFailAtOnce = ((hostname, options, callback) => {
  if (!/(^|\.)invalid\.?$/i.test(hostname)) return (systemLookup as unknown as Lookup)(hostname, options, callback);
  const error = Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND', hostname });
  process.nextTick(() => callback(error, '', 0));
}) as Lookup as unknown as LookupFunction;
