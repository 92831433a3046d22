import { randomUUID } from 'node:crypto';
import http, { type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { SSEServerTransport } from '@modelcontextprotocol/sdk/server/sse.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { CallToolRequestSchema, type CallToolResult, ListToolsRequestSchema, type Tool } from '@modelcontextprotocol/sdk/types.js';

/**
 * A customer's MCP server on 127.0.0.1, built with the SDK: Streamable HTTP at /mcp (stateless) and
 * the legacy HTTP+SSE transport at /sse, and stateful Streamable HTTP at /stateful (sessions the
 * server can forget). Its tools can change between requests, and tools/list
 * answers them `pageSize` at a time with nextCursor. Every request's headers are recorded.
 *
 * tools/call, whatever tools it lists: `fail` answers an isError result of its own; `slow` sends three
 * progress notifications (when given a token), then waits for `release()` or for its request to be
 * aborted (recorded in `aborted`); `die` destroys the connection the call came on; any other name
 * echoes its arguments as text and as structuredContent. Every call is recorded in `calls`.
 */
export interface FakeMcpServer {
  url: string;
  port: number;
  tools: Tool[];
  pageSize: number;
  /** Headers of every HTTP request received. */
  headers: IncomingHttpHeaders[];
  /** Every tools/call received: the tool's name and arguments. */
  calls: { name: string; arguments: Record<string, unknown> }[];
  /** Names of the calls whose request was aborted while they ran. */
  aborted: string[];
  /** MCP sessions clients started (each `notifications/initialized` received). */
  sessionsStarted: number;
  /** Drops every /stateful session: a request naming one is answered 404, as after a restart. */
  forgetSessions(): void;
  /** Resolves the `slow` calls waiting. */
  release(): void;
  /** Resolves when a `slow` call has sent its progress and waits. */
  slowWaiting(): Promise<void>;
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

interface CallState {
  tools: Tool[];
  pageSize: number;
  calls: FakeMcpServer['calls'];
  aborted: string[];
  waiters: Set<() => void>;
  onSlowWaiting: Set<() => void>;
  sessionsStarted: number;
}

function mcpServer(state: CallState, kill: () => void): Server {
  const server = new Server({ name: 'fake-tracker', version: '1.2.3' }, { capabilities: { tools: {} } });
  server.oninitialized = () => void state.sessionsStarted++;
  server.setRequestHandler(ListToolsRequestSchema, async (request) => {
    const start = Number(request.params?.cursor ?? 0);
    const page = state.tools.slice(start, start + state.pageSize);
    const next = start + state.pageSize;
    return { tools: page, ...(next < state.tools.length ? { nextCursor: String(next) } : {}) };
  });
  server.setRequestHandler(CallToolRequestSchema, async (request, extra): Promise<CallToolResult> => {
    const { name } = request.params;
    const args = request.params.arguments ?? {};
    state.calls.push({ name, arguments: args });
    if (name === 'fail') return { isError: true, content: [{ type: 'text', text: 'the tracker refused: no such issue' }], _meta: { 'tracker/trace': 'f1' } };
    if (name === 'die') {
      kill();
      return new Promise<CallToolResult>(() => undefined);
    }
    if (name === 'slow') {
      const token = request.params._meta?.progressToken;
      if (token !== undefined) {
        for (const progress of [1, 2, 3]) {
          await extra.sendNotification({ method: 'notifications/progress', params: { progressToken: token, progress, total: 4, message: `step ${progress}` } });
        }
      }
      await new Promise<void>((resolve) => {
        state.waiters.add(resolve);
        extra.signal.addEventListener('abort', () => {
          state.aborted.push(name);
          resolve();
        });
        for (const notify of state.onSlowWaiting) notify();
        state.onSlowWaiting.clear();
      });
      return { content: [{ type: 'text', text: 'slow done' }] };
    }
    return { content: [{ type: 'text', text: JSON.stringify(args) }], structuredContent: { echoed: args } };
  });
  return server;
}

export async function startFakeMcpServer(tools: Tool[] = [], protection?: BearerProtection): Promise<FakeMcpServer> {
  const calls: CallState = { tools, pageSize: 2, calls: [], aborted: [], waiters: new Set(), onSlowWaiting: new Set(), sessionsStarted: 0 };
  const state: FakeMcpServer = {
    url: '',
    port: 0,
    get tools() {
      return calls.tools;
    },
    set tools(value) {
      calls.tools = value;
    },
    get pageSize() {
      return calls.pageSize;
    },
    set pageSize(value) {
      calls.pageSize = value;
    },
    headers: [],
    get sessionsStarted() {
      return calls.sessionsStarted;
    },
    forgetSessions: () => statefulSessions.clear(),
    calls: calls.calls,
    aborted: calls.aborted,
    release() {
      for (const resolve of calls.waiters) resolve();
      calls.waiters.clear();
    },
    slowWaiting: () => new Promise<void>((resolve) => calls.onSlowWaiting.add(resolve)),
    close: async () => undefined,
  };
  const sseSessions = new Map<string, SSEServerTransport>();
  const statefulSessions = new Map<string, StreamableHTTPServerTransport>();
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
      const mcp = mcpServer(calls, () => req.socket.destroy());
      res.on('close', () => {
        void transport.close();
        void mcp.close();
      });
      await mcp.connect(transport);
      await transport.handleRequest(req, res);
      return;
    }
    if (path === '/stateful') {
      const sessionId = req.headers['mcp-session-id'];
      if (typeof sessionId === 'string') {
        const known = statefulSessions.get(sessionId);
        if (!known) {
          res.writeHead(404, { 'content-type': 'application/json' }).end(JSON.stringify({ jsonrpc: '2.0', error: { code: -32001, message: 'Session not found' }, id: null }));
          return;
        }
        await known.handleRequest(req, res);
        return;
      }
      const transport: StreamableHTTPServerTransport = new StreamableHTTPServerTransport({
        sessionIdGenerator: () => randomUUID(),
        onsessioninitialized: (id) => void statefulSessions.set(id, transport),
      });
      await mcpServer(calls, () => req.socket.destroy()).connect(transport);
      await transport.handleRequest(req, res);
      return;
    }
    if (path === '/sse' && req.method === 'GET') {
      const transport = new SSEServerTransport('/messages', res);
      sseSessions.set(transport.sessionId, transport);
      res.on('close', () => sseSessions.delete(transport.sessionId));
      await mcpServer(calls, () => res.socket?.destroy()).connect(transport);
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
