import { loadOnce } from '../kernel/load-once.ts';

/**
 * The MCP SDK's server side (its server, the Streamable HTTP transport and the protocol's schemas),
 * imported when the first MCP request arrives rather than at start: its modules hold about 7 MiB of
 * heap, which a process that serves no MCP (a gateway replica) would otherwise carry for nothing.
 */
export const mcpServerSdk = loadOnce(async () => {
  const [server, transport, types] = await Promise.all([
    import('@modelcontextprotocol/sdk/server/index.js'),
    import('@modelcontextprotocol/sdk/server/streamableHttp.js'),
    import('@modelcontextprotocol/sdk/types.js'),
  ]);
  return { Server: server.Server, StreamableHTTPServerTransport: transport.StreamableHTTPServerTransport, types };
});
