import http, { type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { SSEServerTransport } from '@modelcontextprotocol/sdk/server/sse.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { ListToolsRequestSchema, type Tool } from '@modelcontextprotocol/sdk/types.js';

/**
 * A customer's MCP server on 127.0.0.1, built with the SDK: Streamable HTTP at /mcp (stateless) and
 * the legacy HTTP+SSE transport at /sse. Its tools can change between requests, and tools/list
 * answers them `pageSize` at a time with nextCursor. Every request's headers are recorded.
 */
export interface FakeMcpServer {
  url: string;
  port: number;
  tools: Tool[];
  pageSize: number;
  /** Headers of every HTTP request received. */
  headers: IncomingHttpHeaders[];
  close(): Promise<void>;
}

/**
 * A server behind OAuth: /mcp demands a bearer `accepts` takes, answering 401 with
 * `WWW-Authenticate: Bearer resource_metadata=…` otherwise, and publishes its RFC 9728 metadata
 * naming the authorization server.
 */
export interface BearerProtection {
  authorizationServer: string;
  accepts(token: string): boolean;
  scopes?: string[];
}

function mcpServer(state: { tools: Tool[]; pageSize: number }): Server {
  const server = new Server({ name: 'fake-tracker', version: '1.2.3' }, { capabilities: { tools: {} } });
  server.setRequestHandler(ListToolsRequestSchema, async (request) => {
    const start = Number(request.params?.cursor ?? 0);
    const page = state.tools.slice(start, start + state.pageSize);
    const next = start + state.pageSize;
    return { tools: page, ...(next < state.tools.length ? { nextCursor: String(next) } : {}) };
  });
  return server;
}

export async function startFakeMcpServer(tools: Tool[] = [], protection?: BearerProtection): Promise<FakeMcpServer> {
  const state: FakeMcpServer = { url: '', port: 0, tools, pageSize: 2, headers: [], close: async () => undefined };
  const sseSessions = new Map<string, SSEServerTransport>();
  const server = http.createServer(async (req, res) => {
    state.headers.push(req.headers);
    const path = new URL(req.url ?? '/', 'http://x').pathname;
    if (protection && path.startsWith('/.well-known/oauth-protected-resource')) {
      const metadata = { resource: `${state.url}/mcp`, authorization_servers: [protection.authorizationServer], scopes_supported: protection.scopes };
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(metadata));
      return;
    }
    if (protection && path === '/mcp') {
      const bearer = /^Bearer (.+)$/.exec(req.headers.authorization ?? '')?.[1];
      if (bearer === undefined || !protection.accepts(bearer)) {
        const metadataUrl = `${state.url}/.well-known/oauth-protected-resource/mcp`;
        res.writeHead(401, { 'www-authenticate': `Bearer error="invalid_token", resource_metadata="${metadataUrl}"` }).end();
        return;
      }
    }
    if (path === '/mcp') {
      const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
      const mcp = mcpServer(state);
      res.on('close', () => {
        void transport.close();
        void mcp.close();
      });
      await mcp.connect(transport);
      await transport.handleRequest(req, res);
      return;
    }
    if (path === '/sse' && req.method === 'GET') {
      const transport = new SSEServerTransport('/messages', res);
      sseSessions.set(transport.sessionId, transport);
      res.on('close', () => sseSessions.delete(transport.sessionId));
      await mcpServer(state).connect(transport);
      return;
    }
    if (path === '/messages' && req.method === 'POST') {
      const session = sseSessions.get(new URL(req.url ?? '/', 'http://x').searchParams.get('sessionId') ?? '');
      if (!session) {
        res.writeHead(404).end();
        return;
      }
      await session.handlePostMessage(req, res);
      return;
    }
    res.writeHead(404).end();
  });
  server.listen(0, '127.0.0.1');
  await new Promise<void>((resolve) => server.once('listening', () => resolve()));
  const port = (server.address() as AddressInfo).port;
  state.port = port;
  state.url = `http://127.0.0.1:${port}`;
  state.close = () =>
    new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    });
  return state;
}

export const tool = (name: string, extra: Partial<Tool> = {}): Tool => ({ name, description: `The ${name} tool`, inputSchema: { type: 'object', properties: {} }, ...extra });
