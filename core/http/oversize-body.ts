import type { IncomingMessage } from 'node:http';

/** At most this much of a refused body is read into nothing before the answer goes out anyway. */
export const DRAIN_MAX_BYTES = 32 * 1024 * 1024;
/** And for at most this long. */
export const DRAIN_MAX_MS = 10_000;

/**
 * Reads what is left of a refused request body (one over its route's limit) and discards it,
 * resolving when the body has ended (true) or a bound was reached or the client went away (false).
 *
 * Fastify refuses a body whose Content-Length is over the limit without reading it and answers with
 * `connection: close`; Node then closes the socket as soon as the answer is written. A client
 * still uploading has its unread bytes in the server's receive buffer, and closing a socket with
 * unread data sends a TCP reset, which can discard the answer before the client reads it: the
 * client sees ECONNRESET or EPIPE instead of 413. Answering once the body has been read ends the
 * connection cleanly. The bounds keep a client from holding the server with an endless upload;
 * past them the answer goes out and the connection closes as before.
 */
export function drainRequestBody(raw: IncomingMessage, limits = { maxBytes: DRAIN_MAX_BYTES, maxMs: DRAIN_MAX_MS }): Promise<boolean> {
  if (bodyIsRead(raw)) return Promise.resolve(true);
  if (raw.destroyed) return Promise.resolve(false);
  return new Promise((resolve) => {
    let received = 0;
    const finish = (drained: boolean) => {
      clearTimeout(timer);
      raw.off('data', onData);
      raw.off('end', onEnd);
      raw.off('close', onClose);
      raw.off('error', onClose);
      resolve(drained);
    };
    const onData = (chunk: Buffer) => {
      received += chunk.length;
      if (received > limits.maxBytes) finish(false);
    };
    const onEnd = () => finish(true);
    const onClose = () => finish(raw.complete);
    const timer = setTimeout(() => finish(false), limits.maxMs);
    raw.on('data', onData);
    raw.once('end', onEnd);
    raw.once('close', onClose);
    raw.once('error', onClose);
    raw.resume();
  });
}

/** Whether nothing of the body is left to arrive. */
export function bodyIsRead(raw: IncomingMessage): boolean {
  return raw.complete || raw.readableEnded;
}
