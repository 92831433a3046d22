import type { FastifyReply } from 'fastify';
import type { Readable } from 'node:stream';

/** A stored file an operation answers with (core/operations/operations.ts `download`). */
export interface FileAnswer {
  readonly filename: string;
  /** As sniffed when the file was stored (core/services/content-sniffing.ts), never the uploader's word. */
  readonly contentType: string;
  readonly size: number;
  readonly stream: Readable;
}

/**
 * Sends a file someone uploaded so that it cannot act on this origin: always a download
 * (`content-disposition: attachment`), never sniffed into another type (`nosniff`), and, should a
 * browser render it anyway, sandboxed with nothing allowed to load (`content-security-policy`).
 * Private to the caller (no shared cache keeps it) unless `shared`: a file anyone with its URL may read.
 */
export function sendFile(reply: FastifyReply, file: FileAnswer, options: { shared?: boolean } = {}): FastifyReply {
  return reply
    .code(200)
    .headers({
      'content-type': file.contentType,
      'content-length': String(file.size),
      'content-disposition': contentDisposition(file.filename),
      'x-content-type-options': 'nosniff',
      'content-security-policy': "default-src 'none'; sandbox",
      // A file made public (an app's stored file behind an unguessable URL) may be embedded by any
      // site (the app's own pages are on another origin) and kept briefly by shared caches.
      'cross-origin-resource-policy': options.shared ? 'cross-origin' : 'same-origin',
      'cache-control': options.shared ? 'public, max-age=60' : 'private, no-store',
    })
    .send(file.stream);
}

/**
 * `attachment` with the name twice (RFC 6266): an ASCII fallback with anything unsafe replaced, and
 * the exact name in UTF-8 percent-encoding (RFC 8187) for the clients that read it.
 */
export function contentDisposition(filename: string): string {
  const fallback = filename.replace(/[^\x20-\x7e]|["\\%;]/g, '_') || 'download';
  const exact = encodeURIComponent(filename).replace(/['()*]/g, (char) => `%${char.charCodeAt(0).toString(16).toUpperCase()}`);
  return `attachment; filename="${fallback}"; filename*=UTF-8''${exact}`;
}

/** Whether the request asks for the bytes (`Accept: application/octet-stream`, with a q above zero) rather than JSON. */
export function acceptsOctetStream(accept: string | undefined): boolean {
  if (!accept) return false;
  return accept.split(',').some((range) => {
    const [type, ...parameters] = range.split(';').map((part) => part.trim().toLowerCase());
    if (type !== 'application/octet-stream') return false;
    const q = parameters.find((parameter) => parameter.startsWith('q='));
    return q === undefined || Number(q.slice(2)) > 0;
  });
}
