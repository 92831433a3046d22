import type { IncomingMessage } from 'node:http';
import { ApiError } from '../kernel/errors.ts';

/**
 * The request's one Authorization header. Node keeps the first of several and drops the others
 * without a trace (as for every header that cannot be a list), so a request carrying two
 * credentials would be served as whichever came first; it is refused instead, 400
 * `duplicate_authorization_header`. Only rawHeaders still shows the others: walking it costs a
 * length comparison per header (headersDistinct would build an array for every header).
 */
export function authorizationHeader(raw: IncomingMessage): string | undefined {
  const names = raw.rawHeaders;
  let seen = false;
  for (let i = 0; i < names.length; i += 2) {
    const name = names[i]!;
    if (name.length !== 13 || !isAuthorization(name)) continue;
    if (seen) {
      throw new ApiError('duplicate_authorization_header', undefined, {
        param: 'authorization',
      });
    }
    seen = true;
  }
  return raw.headers.authorization;
}

function isAuthorization(name: string): boolean {
  return name === 'authorization' || name === 'Authorization' || name.toLowerCase() === 'authorization';
}
