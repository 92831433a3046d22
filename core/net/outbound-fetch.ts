import type { Cancellation } from '../gateway/call-signal.ts';
import { type OutboundHttpClient, OutboundHttpError, type OutboundStreamRequest } from './outbound-http-client.ts';

/** The deadlines of every call a fetch built here makes (see OutboundStreamRequest). */
export type OutboundFetchLimits = Pick<OutboundStreamRequest, 'headersTimeoutMs' | 'idleTimeoutMs' | 'totalTimeoutMs' | 'maxResponseBytes'>;

/** What a library that takes a custom fetch calls it with (the MCP SDK's client transports do). */
export type FetchLike = (input: string | URL | Request, init?: RequestInit) => Promise<Response>;

/** Statuses a Response may not carry a body with. */
const BODILESS = new Set([101, 204, 205, 304]);

/**
 * A `fetch` over the guarded outbound client's streamed mode, for libraries that speak HTTP
 * through a fetch they are given (the MCP SDK's transports) to a URL a customer gave us: each
 * request is guarded (at dial time too), never follows a redirect, keeps the client's deadlines
 * and cap, and rejects with an OutboundHttpError (its kind and a message without path or secrets).
 */
export function outboundFetch(http: OutboundHttpClient, limits: OutboundFetchLimits = {}): FetchLike {
  return async (input, init = {}) => {
    const request = input instanceof Request ? input : null;
    const url = typeof input === 'string' ? input : input instanceof URL ? input.href : input.url;
    const headers: Record<string, string> = {};
    new Headers(init.headers ?? request?.headers).forEach((value, name) => {
      headers[name] = value;
    });
    const answer = await http.stream({
      url,
      method: init.method ?? request?.method ?? 'GET',
      headers,
      ...(await bodyOf(init, request)),
      ...((init.signal ?? request?.signal) ? { signal: (init.signal ?? request?.signal) as Cancellation } : {}),
      ...limits,
    });
    const responseHeaders = new Headers();
    for (const [name, value] of Object.entries(answer.headers)) {
      if (value === undefined) continue;
      for (const each of Array.isArray(value) ? value : [value]) responseHeaders.append(name, each);
    }
    if (BODILESS.has(answer.status)) {
      await answer.body.cancel();
      return new Response(null, { status: answer.status, headers: responseHeaders });
    }
    return new Response(answer.body, { status: answer.status, headers: responseHeaders });
  };
}

/** The request body as the client sends it: text or bytes; a stream body is read first (MCP messages are small). */
async function bodyOf(init: RequestInit, request: Request | null): Promise<{ body?: string | Uint8Array }> {
  const body = init.body ?? null;
  if (body === null) return request?.body ? { body: new Uint8Array(await request.arrayBuffer()) } : {};
  if (typeof body === 'string') return { body };
  if (body instanceof Uint8Array) return { body };
  if (body instanceof ArrayBuffer) return { body: new Uint8Array(body) };
  if (body instanceof URLSearchParams) return { body: body.toString() };
  throw new OutboundHttpError('protocol', 'A request body of this kind cannot be sent to a customer URL');
}
