/**
 * Section 9 of bench/gateway-overhead.ts: an MCP `tools/call` through the tool gateway
 * (`/mcp/gateway`, with the bench's key) next to the same call made straight to the upstream, both
 * with the MCP SDK's client over Streamable HTTP. The upstream is a loopback SDK-built server
 * (stateless Streamable HTTP, one `echo` tool) started here, in the load generator's process: its
 * cost is the same on both paths. What the gateway adds per call is its own MCP server, the key's
 * grants, the rate limit, an outbound MCP session to the upstream (initialize, then the call) and
 * the call's usage row.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { z } from 'zod';

/** Sequential calls per target (after the warm-up), alternating direct and gateway. */
export const TOOL_SEQUENTIAL_CALLS = 300;
export const TOOL_WARMUP_CALLS = 30;
/** Calls in flight at once, and the calls made that way per target. */
export const TOOL_CONCURRENCY = 16;
export const TOOL_CONCURRENT_CALLS = 800;

export interface EchoUpstream {
  url: string;
  close(): Promise<void>;
}

/** The upstream: one `echo` tool, stateless Streamable HTTP at /mcp (a fresh SDK server per request, as the SDK's stateless example). */
export async function startEchoUpstream(): Promise<EchoUpstream> {
  const server = http.createServer(async (req, res) => {
    if (new URL(req.url ?? '/', 'http://x').pathname !== '/mcp') {
      res.writeHead(404).end();
      return;
    }
    const mcp = new McpServer({ name: 'bench-echo', version: '1.0.0' }, { capabilities: { tools: {} } });
    mcp.registerTool('echo', { description: 'Answers the text it is given.', inputSchema: { text: z.string() }, annotations: { readOnlyHint: true } }, async ({ text }) => ({
      content: [{ type: 'text', text }],
    }));
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
    res.on('close', () => {
      void transport.close();
      void mcp.close();
    });
    await mcp.connect(transport);
    await transport.handleRequest(req, res);
  });
  server.listen(0, '127.0.0.1');
  await new Promise<void>((resolve) => server.once('listening', () => resolve()));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp`;
  return {
    url,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/**
 * Registers the upstream on the gateway as its owner would (it must allow private networks: the
 * upstream is on loopback), switches `echo` on, puts it in a group granted to the bench's key;
 * answers the name the key calls it by.
 */
export async function grantEcho(gatewayUrl: string, ownerToken: string, keyId: string, upstreamUrl: string): Promise<string> {
  const api = async (method: string, path: string, body: unknown) => {
    const answer = await fetch(`${gatewayUrl}/client${path}`, {
      method,
      headers: { 'content-type': 'application/json', authorization: `Bearer ${ownerToken}` },
      body: JSON.stringify(body),
    });
    const json = (await answer.json()) as { id: string; health?: { status: string } };
    if (answer.status >= 300) throw new Error(`${method} ${path} answered ${answer.status}: ${JSON.stringify(json)}`);
    return json;
  };
  const upstream = await api('POST', '/mcp/upstreams', { name: 'Bench echo', slug: 'bench', url: upstreamUrl, newTools: 'enabled' });
  if (upstream.health?.status !== 'ok') throw new Error(`the bench upstream was not discovered: ${JSON.stringify(upstream.health)}`);
  const tools = (await fetch(`${gatewayUrl}/client/mcp/tools?upstreamId=${upstream.id}`, { headers: { authorization: `Bearer ${ownerToken}` } }).then((r) => r.json())) as {
    data: Array<{ id: string; name: string; gatewayName: string }>;
  };
  const echo = tools.data.find((each) => each.name === 'echo');
  if (!echo) throw new Error('the bench upstream has no echo tool');
  const group = await api('POST', '/mcp/groups', { name: 'bench' });
  await api('PUT', `/mcp/groups/${group.id}/tools`, { toolIds: [echo.id] });
  await api('POST', '/mcp/grants', { groupId: group.id, keyId });
  return echo.gatewayName;
}

interface ToolTarget {
  name: 'direct' | 'gateway';
  client: Client;
  tool: string;
}

async function connect(name: ToolTarget['name'], url: string, tool: string, bearer: string | null): Promise<ToolTarget> {
  const client = new Client({ name: 'svc-bench', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(url), bearer ? { requestInit: { headers: { authorization: `Bearer ${bearer}` } } } : {}));
  return { name, client, tool };
}

async function timedCall(target: ToolTarget, i: number): Promise<number> {
  const started = performance.now();
  const result = await target.client.callTool({ name: target.tool, arguments: { text: `call ${i}` } });
  const ms = performance.now() - started;
  if (result.isError) throw new Error(`${target.name}: tools/call answered isError: ${JSON.stringify(result.content)}`);
  return ms;
}

export interface LatencyFigures {
  p50: number;
  p99: number;
  mean: number;
}

export interface ToolCallFigures {
  sequential: { calls: number; direct: LatencyFigures & { callsPerSecond: number }; gateway: LatencyFigures & { callsPerSecond: number } };
  concurrent: { concurrency: number; calls: number; direct: LatencyFigures & { callsPerSecond: number }; gateway: LatencyFigures & { callsPerSecond: number } };
}

function figures(samples: number[], seconds: number) {
  const sorted = [...samples].sort((a, b) => a - b);
  const at = (p: number) => sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
  return { p50: at(50), p99: at(99), mean: samples.reduce((sum, x) => sum + x, 0) / samples.length, callsPerSecond: samples.length / seconds };
}

/** N sequential calls alternating the two targets, then C at a time per target (each target alone, direct first). */
export async function measureToolCalls(gatewayUrl: string, key: string, upstreamUrl: string, gatewayName: string): Promise<ToolCallFigures> {
  const direct = await connect('direct', upstreamUrl, 'echo', null);
  const gateway = await connect('gateway', `${gatewayUrl}/mcp/gateway`, gatewayName, key);
  try {
    for (let i = 0; i < TOOL_WARMUP_CALLS; i++) {
      await timedCall(direct, i);
      await timedCall(gateway, i);
    }
    const sequential = { direct: [] as number[], gateway: [] as number[] };
    for (let i = 0; i < TOOL_SEQUENTIAL_CALLS; i++) {
      sequential.direct.push(await timedCall(direct, i));
      sequential.gateway.push(await timedCall(gateway, i));
    }
    // Sequential calls/s from the calls' own times: the alternation's other half is not this target's.
    const seconds = (samples: number[]) => samples.reduce((sum, x) => sum + x, 0) / 1000;
    const concurrent = async (target: ToolTarget) => {
      const samples: number[] = [];
      let next = 0;
      const started = performance.now();
      const worker = async () => {
        while (next < TOOL_CONCURRENT_CALLS) samples.push(await timedCall(target, next++));
      };
      await Promise.all(Array.from({ length: TOOL_CONCURRENCY }, worker));
      return figures(samples, (performance.now() - started) / 1000);
    };
    return {
      sequential: {
        calls: TOOL_SEQUENTIAL_CALLS,
        direct: figures(sequential.direct, seconds(sequential.direct)),
        gateway: figures(sequential.gateway, seconds(sequential.gateway)),
      },
      concurrent: { concurrency: TOOL_CONCURRENCY, calls: TOOL_CONCURRENT_CALLS, direct: await concurrent(direct), gateway: await concurrent(gateway) },
    };
  } finally {
    await Promise.allSettled([direct.client.close(), gateway.client.close()]);
  }
}
