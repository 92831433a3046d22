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

/**
 * The credential of a route that also takes `x-api-key` (Anthropic's SDKs send their key there),
 * as the Authorization header it stands for. A request carrying both is two credentials, refused
 * as two Authorization headers are.
 */
export function withXApiKey(raw: IncomingMessage, authorization: string | undefined): string | undefined {
  const key = raw.headers['x-api-key'];
  if (key === undefined) return authorization;
  if (authorization !== undefined) {
    throw new ApiError('duplicate_authorization_header', 'The request carries both Authorization and x-api-key; send exactly one credential', {
      param: 'x-api-key',
    });
  }
  return `Bearer ${key}`;
}
