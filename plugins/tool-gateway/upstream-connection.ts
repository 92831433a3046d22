import { setMaxListeners } from 'node:events';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import { ApiError } from '../../core/kernel/errors.ts';
import { type FetchLike, outboundFetch } from '../../core/net/outbound-fetch.ts';
import { type OutboundHttpClient, OutboundHttpError } from '../../core/net/outbound-http-client.ts';
import { connectDemoTools } from './demo-tools.ts';
import { type McpClientSdk, mcpClientSdk } from './mcp-client-sdk.ts';
import type { UpstreamTransport } from './upstream-store.ts';

/** What the gateway needs to reach a server: where, how, with which header (its value read from the vault just now). */
export interface UpstreamTarget {
  url: string;
  transport: UpstreamTransport;
  /** Sent on every request to the server; never the agent's credential. Built by upstreamHeaders only. */
  headers: Record<string, string>;
  timeoutMs: number;
  /** The registered upstream's id (absent while testing one before it is saved): whose demo notes a demo upstream sees. */
  upstreamId?: string;
}

/**
 * Why talking to an upstream failed: the outbound client's kinds (refused_address, connect, timeout,
 * too_large, protocol, aborted), `http_status` (the server answered an HTTP error, 401 for a wrong
 * secret), `mcp_error` (it answered the protocol with an error), `too_many_tools` (discovery only),
 * and the OAuth states that keep the gateway from calling at all (`OAuthFailureKind`).
 */
export type UpstreamFailureKind = OutboundHttpError['kind'] | 'http_status' | 'mcp_error' | 'too_many_tools' | OAuthFailureKind;

/**
 * An OAuth upstream the gateway could not call at all: nobody signed in yet (`not_connected`), its
 * server refused the refresh and a person must sign in again (`needs_sign_in`), or its server did
 * not answer the refresh (`oauth`).
 */
export type OAuthFailureKind = 'not_connected' | 'needs_sign_in' | 'oauth';

/** The codes `upstreamHeaders` throws for those states, by the failure each is. */
const CREDENTIAL_FAILURES: Partial<Record<string, OAuthFailureKind>> = {
  upstream_oauth_not_connected: 'not_connected',
  upstream_needs_sign_in: 'needs_sign_in',
  upstream_oauth_unavailable: 'oauth',
};

/**
 * The upstream's credential as headers (`upstreamHeaders`, passed in), with its OAuth states as
 * UpstreamFailures: discovery records them in health, a tool call tells the agent.
 */
export async function credentialHeaders(headersOf: () => Promise<Record<string, string>>): Promise<Record<string, string>> {
  try {
    return await headersOf();
  } catch (error) {
    const kind = error instanceof ApiError ? CREDENTIAL_FAILURES[error.catalogued] : undefined;
    if (kind === undefined) throw error;
    throw new UpstreamFailure(kind, error instanceof ApiError ? error.message : String(error));
  }
}

/** A failure in our own words: SDK messages may quote an answer's body or the URL's path, these never do. */
export class UpstreamFailure extends Error {
  constructor(
    readonly kind: UpstreamFailureKind,
    message: string,
  ) {
    super(message);
  }
}

/** A connected MCP client session to one upstream, for the span of `use`. */
export interface UpstreamSession {
  client: Client;
  transport: Transport;
  /** The server's origin: the only part of its URL a message may name. */
  origin: string;
}

/** A connected session and how to read a failure met on it in our own words. */
export interface OpenUpstream {
  session: UpstreamSession;
  /** The failure as an UpstreamFailure (`what` names the step when nothing more precise can be said). */
  classify(error: unknown, what: string): UpstreamFailure;
  close(): Promise<void>;
}

/**
 * Connects to a customer's MCP server as an MCP client (initialize). Every request goes through the
 * guarded outbound client's fetch, so the URL is checked again as it is dialled, with the upstream's
 * `timeoutMs` as headers and idle deadline and answers capped at `maxAnswerBytes`; redirects are
 * never followed. A failure to connect is thrown as an UpstreamFailure. The one way to reach an
 * upstream: discovery (withUpstream) and tool calls (upstream-sessions.ts) both come through here.
 */
export async function openUpstream(http: OutboundHttpClient, target: UpstreamTarget, maxAnswerBytes: number): Promise<OpenUpstream> {
  // `demo:` has no origin of its own (URL answers "null"): messages name the demo tools instead.
  const origin = target.transport === 'demo' ? 'the demo tools' : new URL(target.url).origin;
  // The fetch remembers the last refusal it met: the SDK wraps transport errors in its own, without their kind.
  let lastRefusal: OutboundHttpError | null = null;
  const guarded = outboundFetch(http, { headersTimeoutMs: target.timeoutMs, idleTimeoutMs: target.timeoutMs, maxResponseBytes: maxAnswerBytes });
  const fetch: FetchLike = async (input, init) => {
    // One session's requests all carry its transport's signal: calls running at once each listen on it.
    if (init?.signal) setMaxListeners(0, init.signal);
    try {
      return await guarded(input, init);
    } catch (error) {
      if (error instanceof OutboundHttpError) lastRefusal = error;
      throw error;
    }
  };
  const sdk = await mcpClientSdk();
  const client = new sdk.Client({ name: 'svc-tool-gateway', version: '1.0.0' }, { capabilities: {} });
  const close = () => client.close().catch(() => undefined);
  try {
    const transport = await transportFor(sdk, target, fetch);
    await client.connect(transport, { timeout: target.timeoutMs, maxTotalTimeout: target.timeoutMs });
    return { session: { client, transport, origin }, classify: (error, what) => classify(sdk, error, lastRefusal, origin, what), close };
  } catch (error) {
    await close();
    throw classify(sdk, error, lastRefusal, origin, 'the MCP handshake');
  }
}

/** Connects (openUpstream), runs `use` and closes, which also aborts any request still open to the server. */
export async function withUpstream<T>(http: OutboundHttpClient, target: UpstreamTarget, maxAnswerBytes: number, what: string, use: (session: UpstreamSession) => Promise<T>): Promise<T> {
  const open = await openUpstream(http, target, maxAnswerBytes);
  try {
    return await use(open.session);
  } catch (error) {
    throw open.classify(error, what);
  } finally {
    await open.close();
  }
}

async function transportFor(sdk: McpClientSdk, target: UpstreamTarget, fetch: FetchLike): Promise<Transport> {
  // The demo tools are served in this process: no URL, no network, no header; the rest of the path is the same.
  if (target.transport === 'demo') return connectDemoTools(target.upstreamId ?? null);
  const url = new URL(target.url);
  const requestInit: RequestInit = { headers: target.headers, redirect: 'manual' };
  if (target.transport === 'sse') {
    // The SDK sends requestInit's headers on the event stream's GET too.
    return new sdk.SSEClientTransport(url, { fetch, requestInit });
  }
  return new sdk.StreamableHTTPClientTransport(url, { fetch, requestInit });
}

function classify(sdk: McpClientSdk, error: unknown, refusal: OutboundHttpError | null, origin: string, what: string): UpstreamFailure {
  const { ErrorCode, McpError } = sdk.types;
  if (error instanceof UpstreamFailure) return error;
  if (error instanceof OutboundHttpError) return new UpstreamFailure(error.kind, error.message);
  const status = httpStatusOf(sdk, error);
  if (status !== null) return new UpstreamFailure('http_status', `${origin} answered HTTP ${status}${status === 401 || status === 403 ? ' (check the authentication header)' : ''}`);
  if (refusal) return new UpstreamFailure(refusal.kind, refusal.message);
  if (error instanceof McpError && error.code === ErrorCode.RequestTimeout) return new UpstreamFailure('timeout', `${origin} did not answer the MCP request in time`);
  if (error instanceof McpError && error.code === ErrorCode.ConnectionClosed) return new UpstreamFailure('connect', `${origin} closed the connection before answering`);
  if (error instanceof McpError) return new UpstreamFailure('mcp_error', `${origin} answered an MCP error (code ${error.code})`);
  return new UpstreamFailure('protocol', `${origin} did not complete ${what}`);
}

function httpStatusOf(sdk: McpClientSdk, error: unknown): number | null {
  if ((error instanceof sdk.StreamableHTTPError || error instanceof sdk.SseError) && typeof error.code === 'number' && error.code >= 300) return error.code;
  return null;
}
