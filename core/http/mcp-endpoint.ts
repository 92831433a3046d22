import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Credential } from '../identity/credential.ts';
import { defineExtensionPoint } from '../kernel/extension-points.ts';

/**
 * Serves one MCP request (Streamable HTTP) for a credential already authenticated by the route
 * that mounts it: `/mcp` on the API host (keys and sessions) and `{auth_url}/mcp` (connectors that
 * signed in over OAuth) answer through the same handler, so tools and their authorization are one.
 */
export type McpEndpoint = (request: FastifyRequest, reply: FastifyReply, credential: Credential) => Promise<void>;

/** Provided by the plugin that serves MCP; without it `{auth_url}/mcp` is not mounted. */
export const McpEndpointPoint = defineExtensionPoint<McpEndpoint>('mcp.endpoint');
