import type { Server } from '@modelcontextprotocol/sdk/server/index.js';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { scopeRefusal } from '../identity/authorization.ts';
import type { Credential } from '../identity/credential.ts';
import type { Scope } from '../identity/scopes.ts';
import { Tokens } from '../kernel/di-tokens.ts';
import { ApiError } from '../kernel/errors.ts';
import { defineExtensionPoint } from '../kernel/extension-points.ts';
import type { OperationCaller } from '../operations/operation-service.ts';
import type { OperationTools } from '../operations/operation-tools.ts';
import { mcpServerSdk } from './mcp-server-sdk.ts';
import { publicOriginOf, requestOrigin } from './request-origin.ts';

/**
 * Serves one MCP request (stateless Streamable HTTP) for a credential the mounting route has
 * already authenticated: `/mcp` on the API host (keys and sessions) and `{auth_url}/mcp`
 * (connectors that signed in over OAuth, plugins/oauth) answer through the same handler, so the
 * tools and their authorization are one.
 */
export type McpEndpoint = (request: FastifyRequest, reply: FastifyReply, credential: Credential) => Promise<void>;

/**
 * Lets a plugin serve `{auth_url}/mcp` with another handler (the OAuth tests use a one-tool echo);
 * unprovided, it serves the operation tools (`operationToolsEndpoint`).
 */
export const McpEndpointPoint = defineExtensionPoint<McpEndpoint>('mcp.endpoint');

export interface McpEndpointOptions {
  /** The credential kinds this mount takes; any other is refused 401 as a credential it does not know. */
  readonly accepts: readonly Credential['kind'][];
  /** The `WWW-Authenticate` challenge of its 401 answers (default `Bearer`). */
  readonly challenge?: string;
  /**
   * What serves the mount (default: the operation registry's tools). A plugin mounting its own MCP
   * server (the tool gateway's `/mcp/gateway`) passes its handler and gets the same checks.
   */
  readonly serve?: McpEndpoint;
  /** The scope the route requires before the handler runs (default `mcp:read`); null: none, the handler authorizes. */
  readonly scope?: Scope | null;
}

const SERVER_INFO = { name: 'svc-management', version: '1.0.0' };
const INSTRUCTIONS =
  'Manage this account: API keys, projects and members, usage, requests, credits and budgets. Each tool is one operation of the management API (the same as /client); you see only what your credential may call.';

/**
 * Mounts the MCP endpoint at `path` (stateless Streamable HTTP): every POST gets a fresh MCP server
 * and transport, answered as JSON, so every replica serves every request and nothing outlives it.
 * GET (a server-initiated stream) and DELETE (ending a session) have nothing to serve: 405 with Allow.
 * The tools are the operation registry's (core/operations/operation-tools.ts) unless `options.serve`
 * says otherwise. Authentication is the kernel's hook, Bearer only (a cookie alone is no credential
 * here); using the endpoint takes `mcp:read` unless `options.scope` says otherwise. A 401 carries the `WWW-Authenticate` challenge; an Origin other than this site's is
 * refused 403, as the MCP transport specification asks against DNS rebinding.
 */
export function mountMcpEndpoint(app: FastifyInstance, path: string, options: McpEndpointOptions): void {
  const { container, config } = app.svc;
  const ownOrigin = publicOriginOf(config.server.publicUrl);
  const serve = options.serve ?? operationToolsEndpoint(container.resolve(Tokens.OperationTools), ownOrigin);
  const challenge = options.challenge ?? 'Bearer';
  const scope = options.scope === undefined ? 'mcp:read' : options.scope;
  app.route({
    method: 'POST',
    url: path,
    config: { auth: { scope }, surface: 'mcp' },
    onRequest: (request, _reply, done) => {
      if (!isAllowedOrigin(request, ownOrigin)) return done(new ApiError('origin_not_allowed'));
      if (!options.accepts.includes(request.credential!.kind)) {
        return done(new ApiError('invalid_api_key', `${path} does not accept this kind of credential`));
      }
      done();
    },
    onSend: (_request, reply, payload, done) => {
      if (reply.statusCode === 401) void reply.header('www-authenticate', challenge);
      done(null, payload);
    },
    handler: (request, reply) => serve(request, reply, request.credential!),
  });
}

/**
 * The operation registry's tools for one request: a fresh MCP server and transport, answered as
 * JSON. Using MCP at all takes `mcp:read` (the API host's route declares it; a connector's grant is
 * checked here, since its route authenticates for itself).
 */
export function operationToolsEndpoint(tools: OperationTools, publicOrigin: string | null = null): McpEndpoint {
  return async (request, reply, credential) => {
    const refusal = scopeRefusal(credential, 'mcp:read');
    if (refusal) throw refusal;
    const caller: OperationCaller = { credential, requestId: request.id, logger: request.log, clientAddress: request.ip, origin: requestOrigin(request, publicOrigin) };
    const { Server, types } = await mcpServerSdk();
    const server = new Server(SERVER_INFO, { capabilities: { tools: { listChanged: false } }, instructions: INSTRUCTIONS });
    server.setRequestHandler(types.ListToolsRequestSchema, () => ({ tools: tools.list(caller.credential) }));
    server.setRequestHandler(types.CallToolRequestSchema, (call) => tools.call(call.params.name, call.params.arguments, caller));
    await answerWithServer(server, request, reply, { stream: false });
  };
}

/**
 * Answers one request with a fresh MCP server (stateless Streamable HTTP): as JSON, or, with
 * `stream`, as an event stream, so notifications related to a call (progress) reach the client
 * before its result. Closing the connection closes the server, which aborts its handlers' signals.
 */
export async function answerWithServer(server: Server, request: FastifyRequest, reply: FastifyReply, options: { stream: boolean }): Promise<void> {
  const { StreamableHTTPServerTransport } = await mcpServerSdk();
  const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: !options.stream });
  reply.raw.on('close', () => {
    void transport.close();
    void server.close();
  });
  await server.connect(transport);
  // The transport writes the answer itself; the headers the kernel's hooks set (x-request-id) go with it.
  for (const [name, value] of Object.entries(reply.getHeaders())) if (value !== undefined) reply.raw.setHeader(name, value);
  reply.hijack();
  await transport.handleRequest(request.raw, reply.raw, request.body);
}

/**
 * The transport specification's rule against DNS rebinding: no Origin (a client that is not a
 * browser), or this site's own (`ownOrigin`: server.publicUrl's or auth_url's, else the request's).
 */
export function isAllowedOrigin(request: FastifyRequest, ownOrigin: string | null): boolean {
  const origin = request.headers.origin;
  return origin === undefined || origin === requestOrigin(request, ownOrigin);
}
