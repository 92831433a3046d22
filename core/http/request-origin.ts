import type { FastifyRequest } from 'fastify';

/**
 * The origin clients reach this service at: `server.publicUrl`'s when one is configured (behind a
 * proxy that terminates TLS the request itself looks like http), else the request's own scheme,
 * host and port. What links the service hands out (an invitation's) and Origin checks compare with.
 */
export function requestOrigin(request: FastifyRequest, publicOrigin: string | null): string {
  return publicOrigin ?? `${request.protocol}://${request.host}`;
}

/** `server.publicUrl`'s origin, or null when none is configured. */
export function publicOriginOf(publicUrl: string | undefined): string | null {
  return publicUrl ? new URL(publicUrl).origin : null;
}
