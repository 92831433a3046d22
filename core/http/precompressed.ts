import { createHash } from 'node:crypto';
import { gzipSync } from 'node:zlib';
import type { FastifyReply, FastifyRequest } from 'fastify';

/**
 * A body that never changes for the process's life (the OpenAPI document, the console's built
 * assets), encoded once: its bytes, their gzip and an ETag. Answering it costs no serialisation
 * or compression per request, and a client holding it gets a 304.
 */
export interface Precompressed {
  readonly type: string;
  readonly identity: Buffer;
  readonly gzip: Buffer;
  readonly etag: string;
}

export function precompressed(body: string | Buffer, type: string): Precompressed {
  const identity = typeof body === 'string' ? Buffer.from(body) : body;
  const etag = `"${createHash('sha256').update(identity).digest('base64url').slice(0, 27)}"`;
  return { type, identity, gzip: gzipSync(identity, { level: 9 }), etag };
}

/** Sends it gzipped where the client accepts gzip; 304 when the client's copy is current. Headers such as cache-control are the caller's. */
export function sendPrecompressed(request: FastifyRequest, reply: FastifyReply, answer: Precompressed): FastifyReply {
  void reply.header('etag', answer.etag).header('vary', 'accept-encoding');
  if (noneMatch(request.headers['if-none-match'], answer.etag)) return reply.code(304).send();
  void reply.type(answer.type);
  if (acceptsGzip(request.headers['accept-encoding'])) return reply.header('content-encoding', 'gzip').send(answer.gzip);
  return reply.send(answer.identity);
}

function noneMatch(header: string | undefined, etag: string): boolean {
  if (!header) return false;
  return header.split(',').some((tag) => {
    const each = tag.trim();
    return each === '*' || each === etag || each === `W/${etag}`;
  });
}

/** gzip (or `*`, when gzip is not named) with a non-zero weight (RFC 9110 §12.5.3). */
function acceptsGzip(header: string | undefined): boolean {
  if (!header) return false;
  const weights = new Map<string, number>();
  for (const part of header.toLowerCase().split(',')) {
    const [coding, ...params] = part.split(';').map((each) => each.trim());
    const q = params.find((param) => param.startsWith('q='));
    weights.set(coding!, q === undefined ? 1 : Number(q.slice(2)));
  }
  return (weights.get('gzip') ?? weights.get('*') ?? 0) > 0;
}
