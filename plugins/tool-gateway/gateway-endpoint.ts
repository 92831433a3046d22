import { createHash, randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import type { CallToolResult, Progress, ServerNotification, Tool } from '@modelcontextprotocol/sdk/types.js';
import type { FastifyBaseLogger } from 'fastify';
import type { InferenceAdmission } from '../../core/gateway/inference-admission.ts';
import type { GatewayMetrics } from '../../core/gateway/metrics.ts';
import { answerWithServer, type McpEndpoint } from '../../core/http/mcp-endpoint.ts';
import { mcpServerSdk } from '../../core/http/mcp-server-sdk.ts';
import { mcpClientSdk } from './mcp-client-sdk.ts';
import type { KeyCredential } from '../../core/identity/credential.ts';
import { ApiError } from '../../core/kernel/errors.ts';
import type { SecretVault } from '../../core/services/secret-vault.ts';
import type { ApprovalGate, ApprovalOutcome } from './approval-gate.ts';
import type { CallStatus, CallStore } from './call-store.ts';
import { type KeyTool, type KeyToolsDeps, toolsOfKey } from './key-tools.ts';
import type { ProjectMode } from './switch-store.ts';
import type { ToolGatewayConfig } from './tool-gateway-config.ts';
import { isDestructive } from './tool-operations.ts';
import { credentialHeaders, UpstreamFailure, type UpstreamFailureKind } from './upstream-connection.ts';
import type { UpstreamOAuth } from './upstream-oauth.ts';
import { upstreamHeaders } from './upstream-secrets.ts';
import type { UpstreamSessions } from './upstream-sessions.ts';

export interface GatewayDeps extends KeyToolsDeps {
  calls: CallStore;
  vault: SecretVault;
  oauth: UpstreamOAuth;
  /** Open MCP sessions to the upstreams, shared by calls. */
  sessions: UpstreamSessions;
  admission: InferenceAdmission;
  approvals: ApprovalGate;
  metrics: GatewayMetrics;
  clock: () => Date;
  config: Pick<ToolGatewayConfig, 'approvalWaitMs'>;
}

const SERVER_INFO = { name: 'svc-tool-gateway', version: '1.0.0' };
const INSTRUCTIONS =
  "Tools of this account's own MCP servers, as granted to your API key: each is named <server>__<tool>. A tool result with isError explains what went wrong (a server down, a rate limit, an approval to wait for); other tools keep working.";

/**
 * Calls in flight on this process, by key and JSON-RPC id: in stateless Streamable HTTP an agent's
 * `notifications/cancelled` arrives in a POST of its own, served by a fresh server that must find
 * the call it names. Only this process's calls are found (see the README).
 */
const inFlight = new Map<string, Set<AbortController>>();
const flightKey = (keyId: string, requestId: string | number) => `${keyId}\u0000${typeof requestId}:${requestId}`;

/**
 * `/mcp/gateway`: an agent's API key sees the tools it is granted (tools/list) and calls them
 * (tools/call) on the customers' own servers. The mount (core/http/mcp-endpoint.ts) has checked the
 * origin and that the credential is an API key; the grant is the authorization, checked on every call.
 */
export function gatewayEndpoint(deps: GatewayDeps): McpEndpoint {
  return async (request, reply, credential) => {
    if (credential.kind !== 'key') throw new ApiError('invalid_api_key', '/mcp/gateway takes API keys only');
    const { Server, types } = await mcpServerSdk();
    const { CallToolRequestSchema, CancelledNotificationSchema, ErrorCode, ListToolsRequestSchema, McpError } = types;
    const server = new Server(SERVER_INFO, { capabilities: { tools: { listChanged: false } }, instructions: INSTRUCTIONS });
    server.setRequestHandler(ListToolsRequestSchema, async () => {
      const { tools } = await toolsOfKey(deps, keyOf(credential), deps.clock());
      return { tools: tools.map(toMcpTool) };
    });
    server.setRequestHandler(CallToolRequestSchema, async (call, extra) => {
      const name = call.params.name;
      const { mode, tools } = await toolsOfKey(deps, keyOf(credential), deps.clock());
      const found = tools.find((each) => each.name === name);
      // Unknown, switched off, ungranted or another project's: one answer, so a guess learns nothing.
      if (!found) throw new McpError(ErrorCode.InvalidParams, `Unknown tool: ${name}`);
      const controller = new AbortController();
      const abort = () => controller.abort();
      extra.signal.addEventListener('abort', abort, { once: true });
      const flight = flightKey(credential.keyId, extra.requestId);
      const peers = inFlight.get(flight) ?? new Set();
      inFlight.set(flight, peers.add(controller));
      try {
        const progressToken = call.params._meta?.progressToken;
        const progress =
          progressToken === undefined ? null : (update: Progress) => extra.sendNotification({ method: 'notifications/progress', params: { progressToken, ...update } } as ServerNotification);
        return await callTool(deps, {
          credential,
          mode,
          tool: found,
          arguments: call.params.arguments ?? {},
          requestId: request.id,
          signal: controller.signal,
          progress,
          logger: request.log,
        });
      } finally {
        extra.signal.removeEventListener('abort', abort);
        peers.delete(controller);
        if (peers.size === 0) inFlight.delete(flight);
      }
    });
    server.setNotificationHandler(CancelledNotificationSchema, (notification) => {
      const { requestId } = notification.params;
      if (requestId === undefined) return;
      for (const controller of inFlight.get(flightKey(credential.keyId, requestId)) ?? []) controller.abort();
    });
    await answerWithServer(server, request, reply, { stream: true });
  };
}

const keyOf = (credential: KeyCredential) => ({ id: credential.keyId, organizationId: credential.organizationId, projectId: credential.projectId });

function toMcpTool({ name, tool }: KeyTool): Tool {
  return {
    name,
    ...(tool.title !== null ? { title: tool.title } : {}),
    ...((tool.descriptionOverride ?? tool.description) !== null ? { description: (tool.descriptionOverride ?? tool.description)! } : {}),
    inputSchema: tool.inputSchema as Tool['inputSchema'],
    ...(tool.outputSchema !== null ? { outputSchema: tool.outputSchema as Tool['outputSchema'] } : {}),
    ...(tool.annotations !== null ? { annotations: tool.annotations } : {}),
  };
}

interface ToolCall {
  credential: KeyCredential;
  mode: ProjectMode;
  tool: KeyTool;
  arguments: Record<string, unknown>;
  requestId: string;
  /** Aborted when the agent cancels the call or goes away. */
  signal: AbortSignal;
  /** Sends a progress notification to the agent, with its token; null when it gave none. */
  progress: ((update: Progress) => Promise<void>) | null;
  logger: FastifyBaseLogger;
}

/** What the row records besides the call itself. */
interface Ending {
  status: CallStatus;
  errorKind?: string | null;
  approvalId?: string | null;
  result: CallToolResult;
}

/**
 * One tools/call of a tool the key sees: the key's rate limits, the approval gate where the project
 * and the tool's policy ask for it, then the upstream with its own credential and timeout. Always
 * answers a result (the upstream's verbatim, or an isError of ours) and writes one row.
 */
async function callTool(deps: GatewayDeps, call: ToolCall): Promise<CallToolResult> {
  const started = performance.now();
  const argumentsJson = canonicalJson(call.arguments);
  const argumentsSha256 = createHash('sha256').update(argumentsJson).digest('hex');
  const ending = await run(deps, call, argumentsSha256);
  const durationMs = performance.now() - started;
  const { tool } = call.tool;
  try {
    await deps.calls.insert({
      id: randomUUID(),
      organizationId: call.credential.organizationId,
      projectId: call.credential.projectId,
      keyId: call.credential.keyId,
      groupId: call.tool.groupIds[0] ?? null,
      upstreamId: tool.upstreamId,
      upstreamSlug: call.tool.slug,
      toolId: tool.id,
      toolName: tool.name,
      gatewayName: call.tool.name,
      status: ending.status,
      errorKind: ending.errorKind ?? null,
      durationMs,
      requestBytes: Buffer.byteLength(JSON.stringify(call.arguments)),
      responseBytes: Buffer.byteLength(JSON.stringify(ending.result)),
      approvalId: ending.approvalId ?? null,
      argumentsSha256,
      requestId: call.requestId,
      createdAt: deps.clock(),
    });
  } catch (error) {
    // The agent still gets its result: a lost row is logged, never a failed call.
    call.logger.error({ err: error, toolId: tool.id }, 'tool call row not written');
  }
  deps.metrics.observeGatewayToolCall(ending.status, durationMs);
  return ending.result;
}

async function run(deps: GatewayDeps, call: ToolCall, argumentsSha256: string): Promise<Ending> {
  const { tool, slug, name } = call.tool;
  try {
    await deps.admission.chargeRequest(call.credential);
  } catch (error) {
    if (!(error instanceof ApiError) || error.status !== 429) throw error;
    const wait = error.headers['retry-after'];
    return { status: 'rate_limited', result: failed(`Rate limit reached: ${error.message}.${wait ? ` Retry in ${wait} seconds.` : ''}`) };
  }
  let approvalId: string | null = null;
  if (needsApproval(call.mode, call.tool)) {
    const outcome = await deps.approvals.decide(
      {
        organizationId: call.credential.organizationId,
        projectId: call.credential.projectId,
        keyId: call.credential.keyId,
        toolId: tool.id,
        upstreamId: tool.upstreamId,
        gatewayName: name,
        argumentsHash: argumentsSha256,
        requestId: call.requestId,
      },
      {
        waitMs: deps.config.approvalWaitMs,
        signal: call.signal,
        ...(call.progress
          ? { onWaiting: (id: string, elapsedMs: number) => call.progress!({ progress: elapsedMs, message: `Waiting for a person to approve this call${id ? ` (approval ${id})` : ''}` }) }
          : {}),
      },
    );
    if (outcome.decision !== 'approved') return unapproved(outcome, name);
    approvalId = outcome.approvalId;
  }
  const upstream = await deps.upstreams.get(call.credential.organizationId, tool.upstreamId);
  if (!upstream) return { status: 'upstream_error', errorKind: 'connect', approvalId, result: failed(`The tool server "${slug}" is no longer registered.`) };
  try {
    const { types } = await mcpClientSdk();
    const headers = await credentialHeaders(() => upstreamHeaders(deps, upstream));
    const target = { url: upstream.url, transport: upstream.transport, headers, timeoutMs: upstream.timeoutMs, upstreamId: upstream.id };
    const result = await deps.sessions.use(
      target,
      'the tools/call',
      ({ client }) =>
        client.callTool({ name: tool.name, arguments: call.arguments }, types.CallToolResultSchema, {
          signal: call.signal,
          // The upstream's timeout is how long it may stay silent: its progress shows it is working.
          timeout: upstream.timeoutMs,
          resetTimeoutOnProgress: true,
          ...(call.progress ? { onprogress: (update: Progress) => void call.progress!(update).catch(() => undefined) } : {}),
        }),
      call.signal,
    );
    return { status: result.isError === true ? 'tool_error' : 'ok', approvalId, result: result as CallToolResult };
  } catch (error) {
    if (call.signal.aborted) return { status: 'cancelled', errorKind: 'aborted', approvalId, result: failed('The call was cancelled; the tool server was told to stop.') };
    const kind: UpstreamFailureKind = error instanceof UpstreamFailure ? error.kind : 'protocol';
    if (!(error instanceof UpstreamFailure)) call.logger.warn({ err: error, upstreamId: upstream.id }, 'tool call failed unexpectedly');
    return { status: 'upstream_error', errorKind: kind, approvalId, result: failed(`The tool server "${slug}" failed: ${FAILURES[kind]}. Other tools keep working.`) };
  }
}

/** In a governed project, a tool whose policy is `always`, or `destructive` and the tool is. A full project asks nobody. */
function needsApproval(mode: ProjectMode, { tool }: KeyTool): boolean {
  if (mode !== 'governed') return false;
  return tool.approval === 'always' || (tool.approval === 'destructive' && isDestructive(tool));
}

function unapproved(outcome: Exclude<ApprovalOutcome, { decision: 'approved' }>, name: string): Ending {
  // An empty id: no approval was ever recorded (the gate could not make one).
  const approvalId = outcome.approvalId === '' ? null : outcome.approvalId;
  const which = approvalId ? `Approval ${approvalId}` : 'Approval';
  if (outcome.decision === 'pending') {
    const text = `${name} needs a person's approval: ${which} is pending until ${outcome.expiresAt.toISOString()}. Once it is approved, call the tool again with the same arguments.`;
    return { status: 'approval_pending', approvalId, result: failed(text) };
  }
  const reason = outcome.reason ? `: ${outcome.reason}` : '';
  if (outcome.decision === 'denied') return { status: 'denied', approvalId, result: failed(`${which} of this call of ${name} was denied${reason}. Do not retry it unchanged.`) };
  return { status: 'expired', approvalId, result: failed(`${which} of this call of ${name} expired before anyone decided${reason}. Calling again asks again.`) };
}

/** What an agent is told of an upstream failure: its kind in plain words, never the server's URL, headers or answer. */
const FAILURES: Record<UpstreamFailureKind, string> = {
  refused_address: 'its address is not one the gateway may call',
  connect: 'it could not be reached, or closed the connection before answering',
  timeout: 'it did not answer in time',
  too_large: 'its answer was larger than the gateway accepts',
  protocol: 'it did not answer as an MCP server',
  aborted: 'the call was stopped',
  http_status: 'it answered with an HTTP error',
  mcp_error: 'it answered the call with a protocol error',
  too_many_tools: 'it lists more tools than the gateway accepts',
  not_connected: 'nobody has signed in to it yet (its owner signs in from the gateway)',
  needs_sign_in: 'its sign-in was refused or has lapsed; a person must sign in to it again',
  oauth: 'its sign-in could not be renewed just now',
};

const failed = (text: string): CallToolResult => ({ content: [{ type: 'text', text }], isError: true });

/** JSON with object keys in code-unit order at every level: equal arguments hash equally whatever their order. */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, each]) => each !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([key, each]) => `${JSON.stringify(key)}:${canonicalJson(each)}`).join(',')}}`;
  }
  return JSON.stringify(value);
}
