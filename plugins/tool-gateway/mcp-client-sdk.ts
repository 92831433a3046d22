import { loadOnce } from '../../core/kernel/load-once.ts';

/**
 * The MCP SDK's client side (the client, both HTTP transports and the protocol's schemas), imported
 * when the tool gateway first reaches an upstream rather than at start, as the server side is
 * (core/http/mcp-server-sdk.ts): a process that never calls a customer's tool never holds it.
 */
export const mcpClientSdk = loadOnce(async () => {
  const [client, sse, streamableHttp, types] = await Promise.all([
    import('@modelcontextprotocol/sdk/client/index.js'),
    import('@modelcontextprotocol/sdk/client/sse.js'),
    import('@modelcontextprotocol/sdk/client/streamableHttp.js'),
    import('@modelcontextprotocol/sdk/types.js'),
  ]);
  return {
    Client: client.Client,
    SSEClientTransport: sse.SSEClientTransport,
    SseError: sse.SseError,
    StreamableHTTPClientTransport: streamableHttp.StreamableHTTPClientTransport,
    StreamableHTTPError: streamableHttp.StreamableHTTPError,
    types,
  };
});

export type McpClientSdk = Awaited<ReturnType<typeof mcpClientSdk>>;

/** The SDK's OAuth client (discovery, registration, PKCE, token exchange and refresh) and its error classes, loaded as the client is. */
export const mcpOAuthSdk = loadOnce(async () => {
  const [auth, errors, utils] = await Promise.all([
    import('@modelcontextprotocol/sdk/client/auth.js'),
    import('@modelcontextprotocol/sdk/server/auth/errors.js'),
    import('@modelcontextprotocol/sdk/shared/auth-utils.js'),
  ]);
  return { ...auth, ...errors, checkResourceAllowed: utils.checkResourceAllowed };
});

export type McpOAuthSdk = Awaited<ReturnType<typeof mcpOAuthSdk>>;
