import { performance } from 'node:perf_hooks';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { SSEClientTransport, SseError } from '@modelcontextprotocol/sdk/client/sse.js';
import { StreamableHTTPClientTransport, StreamableHTTPError } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import { ErrorCode, McpError, type Tool } from '@modelcontextprotocol/sdk/types.js';
import { type FetchLike, outboundFetch } from '../../core/net/outbound-fetch.ts';
import { type OutboundHttpClient, OutboundHttpError } from '../../core/net/outbound-http-client.ts';
import type { ToolDefinition } from './tool-store.ts';
import type { UpstreamTransport } from './upstream-store.ts';

/** What the gateway needs to reach a server: where, how, with which header (its value read from the vault just now). */
export interface UpstreamTarget {
  url: string;
  transport: UpstreamTransport;
  /** Sent on every request to the server; never the agent's credential. */
  headers: Record<string, string>;
  timeoutMs: number;
}

export interface DiscoveryLimits {
  maxTools: number;
  maxPages: number;
  maxAnswerBytes: number;
}

/**
 * Why a discovery failed: the outbound client's kinds (refused_address, connect, timeout,
 * too_large, protocol, aborted), `http_status` (the server answered an HTTP error, 401 for a
 * wrong secret), `mcp_error` (it answered the protocol with an error), `too_many_tools`, and the
 * OAuth kinds below.
 */
export type DiscoveryFailureKind = OutboundHttpError['kind'] | 'http_status' | 'mcp_error' | 'too_many_tools' | OAuthFailureKind;

/**
 * An OAuth upstream the gateway could not call at all: nobody signed in yet (`not_connected`), its
 * server refused the refresh and a person must sign in again (`needs_sign_in`), or its server did
 * not answer the refresh (`oauth`).
 */
export type OAuthFailureKind = 'not_connected' | 'needs_sign_in' | 'oauth';

export type Discovery =
  | {
      ok: true;
      serverInfo: { name: string; version: string } | null;
      protocolVersion: string | null;
      tools: ToolDefinition[];
      durationMs: number;
    }
  | { ok: false; errorKind: DiscoveryFailureKind; error: string; durationMs: number };

class DiscoveryFailure extends Error {
  constructor(
    readonly kind: DiscoveryFailureKind,
    message: string,
  ) {
    super(message);
  }
}

/**
 * Connects to a customer's MCP server as an MCP client, initializes, lists every tool (following
 * `nextCursor`) and closes. Every request goes through the guarded outbound client (its fetch), so
 * the URL is checked again as it is dialled; a failure is a result with a kind and a message that
 * names the server's origin, never its path, the header or any answer body.
 */
export async function discoverTools(http: OutboundHttpClient, target: UpstreamTarget, limits: DiscoveryLimits): Promise<Discovery> {
  const started = performance.now();
  const origin = new URL(target.url).origin;
  // The fetch remembers the last refusal it met: the SDK wraps transport errors in its own, without their kind.
  let lastRefusal: OutboundHttpError | null = null;
  const guarded = outboundFetch(http, { headersTimeoutMs: target.timeoutMs, idleTimeoutMs: target.timeoutMs, maxResponseBytes: limits.maxAnswerBytes });
  const fetch: FetchLike = async (input, init) => {
    try {
      return await guarded(input, init);
    } catch (error) {
      if (error instanceof OutboundHttpError) lastRefusal = error;
      throw error;
    }
  };
  const transport = transportFor(target, fetch);
  const client = new Client({ name: 'svc-tool-gateway', version: '1.0.0' }, { capabilities: {} });
  const options = { timeout: target.timeoutMs, maxTotalTimeout: target.timeoutMs };
  try {
    await client.connect(transport, options);
    const tools: ToolDefinition[] = [];
    const seenCursors = new Set<string>();
    let cursor: string | undefined;
    for (let page = 0; ; page++) {
      if (page >= limits.maxPages) throw new DiscoveryFailure('too_many_tools', `${origin} lists its tools over more than ${limits.maxPages} pages`);
      const listed = await client.listTools(cursor === undefined ? {} : { cursor }, options);
      for (const tool of listed.tools) tools.push(definitionOf(tool));
      if (tools.length > limits.maxTools) throw new DiscoveryFailure('too_many_tools', `${origin} lists more than ${limits.maxTools} tools`);
      cursor = listed.nextCursor;
      if (cursor === undefined) break;
      if (seenCursors.has(cursor)) throw new DiscoveryFailure('protocol', `${origin} answered a tools/list cursor it had given before`);
      seenCursors.add(cursor);
    }
    const version = client.getServerVersion();
    return {
      ok: true,
      serverInfo: version ? { name: version.name, version: version.version } : null,
      protocolVersion: transport instanceof StreamableHTTPClientTransport ? (transport.protocolVersion ?? null) : null,
      tools: uniqueByName(tools),
      durationMs: performance.now() - started,
    };
  } catch (error) {
    const failure = classify(error, lastRefusal, origin);
    return { ok: false, errorKind: failure.kind, error: failure.message, durationMs: performance.now() - started };
  } finally {
    await client.close().catch(() => undefined);
  }
}

function transportFor(target: UpstreamTarget, fetch: FetchLike): Transport {
  const url = new URL(target.url);
  const requestInit: RequestInit = { headers: target.headers, redirect: 'manual' };
  if (target.transport === 'sse') {
    // The SDK sends requestInit's headers on the event stream's GET too.
    return new SSEClientTransport(url, { fetch, requestInit });
  }
  return new StreamableHTTPClientTransport(url, { fetch, requestInit });
}

/** A server listing one name twice: the first wins (a tool is identified by its name there). */
function uniqueByName(tools: ToolDefinition[]): ToolDefinition[] {
  const seen = new Set<string>();
  return tools.filter((tool) => !seen.has(tool.name) && seen.add(tool.name));
}

function definitionOf(tool: Tool): ToolDefinition {
  return {
    name: tool.name,
    title: tool.title ?? tool.annotations?.title ?? null,
    description: tool.description ?? null,
    inputSchema: tool.inputSchema as Record<string, unknown>,
    outputSchema: (tool.outputSchema as Record<string, unknown> | undefined) ?? null,
    annotations: (tool.annotations as Record<string, unknown> | undefined) ?? null,
  };
}

/** The failure's kind and a message of our own words: SDK messages may quote an answer's body or the URL's path. */
function classify(error: unknown, refusal: OutboundHttpError | null, origin: string): DiscoveryFailure {
  if (error instanceof DiscoveryFailure) return error;
  if (error instanceof OutboundHttpError) return new DiscoveryFailure(error.kind, error.message);
  const status = httpStatusOf(error);
  if (status !== null) return new DiscoveryFailure('http_status', `${origin} answered HTTP ${status}${status === 401 || status === 403 ? ' (check the authentication header)' : ''}`);
  if (refusal) return new DiscoveryFailure(refusal.kind, refusal.message);
  if (error instanceof McpError && error.code === ErrorCode.RequestTimeout) return new DiscoveryFailure('timeout', `${origin} did not answer the MCP request in time`);
  if (error instanceof McpError) return new DiscoveryFailure('mcp_error', `${origin} answered an MCP error (code ${error.code})`);
  return new DiscoveryFailure('protocol', `${origin} did not complete the MCP handshake and tools/list`);
}

function httpStatusOf(error: unknown): number | null {
  if ((error instanceof StreamableHTTPError || error instanceof SseError) && typeof error.code === 'number' && error.code >= 300) return error.code;
  return null;
}
