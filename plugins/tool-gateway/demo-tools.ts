import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import { z } from 'zod';
import { loadOnce } from '../../core/kernel/load-once.ts';

export type DemoNotes = Map<string, { id: string; title: string; body: string; createdAt: string }>;

/** The url a demo upstream is stored and shown with: it has none, and this is no address anything dials. */
export const DEMO_URL = 'demo:';

/** The most notes one demo upstream keeps: it is a demo in this process's memory, not a store. */
const MAX_NOTES = 100;

/**
 * The notes of this process's demo tools, per registered demo upstream: every connection (every call)
 * to one upstream sees the same ones, and an upstream (of one organisation's project) sees only its own.
 */
const notesByUpstream = new Map<string, DemoNotes>();

/** The SDK's in-process transport and high-level server, imported on the first demo connection (mcp-client-sdk.ts says why). */
const demoSdk = loadOnce(async () => {
  const [inMemory, server] = await Promise.all([import('@modelcontextprotocol/sdk/inMemory.js'), import('@modelcontextprotocol/sdk/server/mcp.js')]);
  return { InMemoryTransport: inMemory.InMemoryTransport, McpServer: server.McpServer };
});

/**
 * A client transport connected to a fresh demo server in this process (an SDK server serves one
 * transport at a time, so each connection gets its own; they share the upstream's notes). Closing
 * the client's side closes the server's. An upstream being tested before it is saved gets no notes kept.
 */
export async function connectDemoTools(upstreamId: string | null, clock: () => Date = () => new Date()): Promise<Transport> {
  let notes: DemoNotes = new Map();
  if (upstreamId !== null) {
    notes = notesByUpstream.get(upstreamId) ?? notes;
    notesByUpstream.set(upstreamId, notes);
  }
  const { InMemoryTransport, McpServer } = await demoSdk();
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  await demoToolsServer(new McpServer({ name: 'svc-demo-tools', version: '1.0.0' }, { capabilities: { tools: {} } }), clock, notes).connect(serverSide);
  return clientSide;
}

/**
 * The demo upstream: a small MCP server that runs inside the service, so a fresh `npm start` can show
 * the whole tool gateway (discovery, switches, bundles, grants, approvals, usage) without a server of
 * the customer's. The gateway reaches it as it reaches any upstream, through the MCP SDK's client, but
 * over an in-process transport instead of HTTP. Its tools cover what the gateway treats differently:
 * read-only tools, a write, a destructive tool (approval by default), progress, a tool error and
 * structured output. Notes live in this process's memory: a demo, not a store.
 */
function demoToolsServer(server: McpServer, clock: () => Date, notes: DemoNotes): McpServer {
  const text = (value: string) => ({ content: [{ type: 'text' as const, text: value }] });

  server.registerTool('echo', { description: 'Answers the text it is given.', inputSchema: { text: z.string().max(10_000) }, annotations: { readOnlyHint: true } }, async ({ text: given }) =>
    text(given),
  );

  server.registerTool(
    'add',
    {
      description: 'Adds two numbers.',
      inputSchema: { a: z.number(), b: z.number() },
      outputSchema: { sum: z.number() },
      annotations: { readOnlyHint: true },
    },
    async ({ a, b }) => ({ ...text(String(a + b)), structuredContent: { sum: a + b } }),
  );

  server.registerTool('current_time', { description: "The service's current time, in UTC.", inputSchema: {}, annotations: { readOnlyHint: true } }, async () => text(clock().toISOString()));

  server.registerTool(
    'count_slowly',
    {
      description: 'Counts from 1 to `to`, sending a progress notification at each step.',
      inputSchema: { to: z.number().int().min(1).max(20), delayMs: z.number().int().min(0).max(2_000).default(200) },
      annotations: { readOnlyHint: true },
    },
    async ({ to, delayMs }, extra) => {
      const progressToken = extra._meta?.progressToken;
      for (let step = 1; step <= to; step++) {
        await sleep(delayMs, undefined, { signal: extra.signal });
        if (progressToken !== undefined) {
          await extra.sendNotification({ method: 'notifications/progress', params: { progressToken, progress: step, total: to } });
        }
      }
      return text(`counted to ${to}`);
    },
  );

  server.registerTool(
    'notes_create',
    {
      description: 'Keeps a note (in memory, for the demo).',
      inputSchema: { title: z.string().min(1).max(200), body: z.string().max(10_000).default('') },
      annotations: { readOnlyHint: false, destructiveHint: false },
    },
    async ({ title, body }) => {
      if (notes.size >= MAX_NOTES) return { ...text(`the demo keeps at most ${MAX_NOTES} notes: delete one first`), isError: true };
      const note = { id: randomUUID(), title, body, createdAt: clock().toISOString() };
      notes.set(note.id, note);
      return { ...text(`note ${note.id} kept`), structuredContent: note };
    },
  );

  server.registerTool('notes_list', { description: 'Lists the notes kept.', inputSchema: {}, annotations: { readOnlyHint: true } }, async () => ({
    ...text(JSON.stringify([...notes.values()])),
    structuredContent: { notes: [...notes.values()] },
  }));

  server.registerTool(
    'notes_delete',
    {
      description: 'Deletes a note for good.',
      inputSchema: { id: z.string() },
      annotations: { readOnlyHint: false, destructiveHint: true },
    },
    async ({ id }) => {
      // A tool's own failure is a result with isError, which the gateway passes on as it is.
      if (!notes.delete(id)) return { ...text(`no note ${id}`), isError: true };
      return text(`note ${id} deleted`);
    },
  );

  return server;
}
