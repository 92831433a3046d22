import { performance } from 'node:perf_hooks';
import type { Tool } from '@modelcontextprotocol/sdk/types.js';
import type { OutboundHttpClient } from '../../core/net/outbound-http-client.ts';
import { mcpClientSdk } from './mcp-client-sdk.ts';
import type { ToolDefinition } from './tool-store.ts';
import { UpstreamFailure, type UpstreamFailureKind, type UpstreamTarget, withUpstream } from './upstream-connection.ts';

export type { UpstreamTarget } from './upstream-connection.ts';

export interface DiscoveryLimits {
  maxTools: number;
  maxPages: number;
  maxAnswerBytes: number;
}

/** Why a discovery failed (upstream-connection.ts has the kinds). */
export type DiscoveryFailureKind = UpstreamFailureKind;

export type Discovery =
  | {
      ok: true;
      serverInfo: { name: string; version: string } | null;
      protocolVersion: string | null;
      tools: ToolDefinition[];
      durationMs: number;
    }
  | { ok: false; errorKind: DiscoveryFailureKind; error: string; durationMs: number };

/**
 * Connects to a customer's MCP server (upstream-connection.ts), initializes, lists every tool
 * (following `nextCursor`) and closes; a failure is a result with a kind and a message that names
 * the server's origin, never its path, the header or any answer body.
 */
export async function discoverTools(http: OutboundHttpClient, target: UpstreamTarget, limits: DiscoveryLimits): Promise<Discovery> {
  const started = performance.now();
  const options = { timeout: target.timeoutMs, maxTotalTimeout: target.timeoutMs };
  try {
    return await withUpstream(http, target, limits.maxAnswerBytes, 'the MCP handshake and tools/list', async ({ client, transport, origin }) => {
      const tools: ToolDefinition[] = [];
      const seenCursors = new Set<string>();
      let cursor: string | undefined;
      for (let page = 0; ; page++) {
        if (page >= limits.maxPages) throw new UpstreamFailure('too_many_tools', `${origin} lists its tools over more than ${limits.maxPages} pages`);
        const listed = await client.listTools(cursor === undefined ? {} : { cursor }, options);
        for (const tool of listed.tools) tools.push(definitionOf(tool));
        if (tools.length > limits.maxTools) throw new UpstreamFailure('too_many_tools', `${origin} lists more than ${limits.maxTools} tools`);
        cursor = listed.nextCursor;
        if (cursor === undefined) break;
        if (seenCursors.has(cursor)) throw new UpstreamFailure('protocol', `${origin} answered a tools/list cursor it had given before`);
        seenCursors.add(cursor);
      }
      const version = client.getServerVersion();
      // Loaded by withUpstream already: this only names the class.
      const { StreamableHTTPClientTransport } = await mcpClientSdk();
      return {
        ok: true as const,
        serverInfo: version ? { name: version.name, version: version.version } : null,
        protocolVersion: transport instanceof StreamableHTTPClientTransport ? (transport.protocolVersion ?? null) : null,
        tools: uniqueByName(tools),
        durationMs: performance.now() - started,
      };
    });
  } catch (error) {
    if (!(error instanceof UpstreamFailure)) throw error;
    return { ok: false, errorKind: error.kind, error: error.message, durationMs: performance.now() - started };
  }
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
