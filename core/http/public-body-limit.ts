import type { FastifyInstance } from 'fastify';

/**
 * The largest body a route that takes no credential accepts (sign-in, set-password, health,
 * metrics…): 8 KB holds the longest legitimate one (an email and a 256-character password, even
 * with every character JSON-escaped) with room to spare. Anyone can send these requests, so they
 * must not be able to make the service read and parse 10 MB for each.
 */
export const PUBLIC_BODY_LIMIT_BYTES = 8 * 1024;

/**
 * Gives every `auth: false` route the public body limit unless it declares its own. Fastify
 * compares a declared content-length with the route's limit before reading a byte of the body
 * (413 `request_too_large`, the body never parsed), and counts the bytes of a chunked one as they
 * arrive. Installed before any route is added: an onRoute hook sees only later routes.
 */
export function installPublicBodyLimit(app: FastifyInstance): void {
  app.addHook('onRoute', (route) => {
    if (route.config?.auth === false) route.bodyLimit ??= PUBLIC_BODY_LIMIT_BYTES;
  });
}
