import { maxHeaderSize, STATUS_CODES, type IncomingMessage, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import type { FastifyBaseLogger } from 'fastify';
import { ApiError } from '../kernel/errors.ts';
import { newRequestId } from '../kernel/request-ids.ts';

/**
 * What Node's parser and request timer report; `reason` is llhttp's own fixed description and
 * `bytesParsed` where in the received bytes it stopped. Node also hangs the bytes themselves on the
 * error (`rawPacket`): they hold the request's Authorization and Cookie lines, so they are never logged.
 */
interface ClientError extends Error {
  code?: string;
  reason?: string;
  bytesParsed?: number;
}

/**
 * Requests Node's HTTP parser refuses before any route sees them: a request line and headers over
 * Node's header limit, a control character in a header, a method the parser does not know, or a
 * request not received within `server.headersTimeoutMs` / `server.requestTimeoutMs`. They are
 * answered on the raw socket in the same envelope as every other error, with a request id of
 * their own, and the connection is closed: the parser cannot find the next request after a bad one.
 */
export function clientErrorHandler(log: () => FastifyBaseLogger, timeouts: { headersTimeoutMs: number; requestTimeoutMs: number }) {
  return (error: ClientError, socket: Socket): void => {
    // A reset connection has nobody to answer.
    if (error.code === 'ECONNRESET' || socket.destroyed) return;
    const requestId = newRequestId();
    // By code, reason and offset only: the error object carries the raw request bytes (see above).
    const refusal = { requestId, code: error.code, reason: error.reason, offset: error.bytesParsed };
    log().debug(refusal, 'refused a request the HTTP parser could not take');
    // Node's own rule: answer only if no response on this connection has begun, or the bytes
    // would land in the middle of it.
    const inFlight = (socket as Socket & { _httpMessage?: ServerResponse | null })._httpMessage;
    if (socket.writable && !inFlight?.headersSent) socket.write(rawResponse(clientErrorFor(error, timeouts), requestId));
    socket.destroy();
  };
}

/**
 * CONNECT asks for a proxy tunnel; Node hands it to 'connect' listeners instead of the router and,
 * with none, closes the connection without a word. It is refused like any other method.
 */
export function refuseConnect(_request: IncomingMessage, socket: Duplex): void {
  socket.write(rawResponse(new ApiError('method_not_allowed', 'Method CONNECT is not allowed: this server is not a proxy'), newRequestId()));
  socket.destroy();
}

function clientErrorFor(error: ClientError, timeouts: { headersTimeoutMs: number; requestTimeoutMs: number }): ApiError {
  switch (error.code) {
    case 'HPE_HEADER_OVERFLOW':
      return new ApiError('request_header_too_large', `The request line and headers are larger than ${maxHeaderSize} bytes`);
    case 'HPE_CHUNK_EXTENSIONS_OVERFLOW':
      return new ApiError('request_too_large', 'The chunk extensions of the body are too large');
    case 'ERR_HTTP_REQUEST_TIMEOUT':
      return new ApiError(
        'request_timeout',
        `The request was not received in time: headers must arrive within ${timeouts.headersTimeoutMs} ms and the whole request within ${timeouts.requestTimeoutMs} ms`,
      );
    case 'HPE_INVALID_METHOD':
      return new ApiError('unsupported_method');
    default:
      return new ApiError('malformed_request', `The request is not valid HTTP/1.1${error.reason ? `: ${error.reason}` : ''}`);
  }
}

function rawResponse(error: ApiError, requestId: string): string {
  const body = JSON.stringify(error.toEnvelope());
  return (
    `HTTP/1.1 ${error.status} ${STATUS_CODES[error.status] ?? ''}\r\n` +
    'content-type: application/json; charset=utf-8\r\n' +
    `content-length: ${Buffer.byteLength(body)}\r\n` +
    `x-request-id: ${requestId}\r\n` +
    'connection: close\r\n\r\n' +
    body
  );
}
