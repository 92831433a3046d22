import type { CallToolResult, Tool } from '@modelcontextprotocol/sdk/types.js';
import { authorizeCredential, scopeRefusal } from '../identity/authorization.ts';
import type { Credential } from '../identity/credential.ts';
import type { GatewayMetrics } from '../gateway/metrics.ts';
import { errorAnswer } from '../kernel/error-answer.ts';
import { ApiError } from '../kernel/errors.ts';
import type { OperationCaller, OperationService } from './operation-service.ts';
import { type AnyOperation, type OperationRegistry, operationJsonSchemas, splitCombinedInput, toolNameOf } from './operations.ts';

/**
 * Every registered operation as an MCP tool, for one credential. A tool is visible exactly when the
 * credential passes what the HTTP surface checks before reading input (the operation's scope and
 * owner-only, core/identity/authorization.ts), the operation is not kept off MCP (`mcp: false`), and,
 * for an operation that writes, the credential holds `mcp:write` (using /mcp at all takes `mcp:read`,
 * checked where the endpoint is mounted). A call runs through the same operation service as HTTP,
 * so the declared resources, validation and the audit record are the same; its failure is a tool
 * result with `isError`, carrying the error envelope.
 */
export class OperationTools {
  constructor(
    private readonly registry: OperationRegistry,
    private readonly service: OperationService,
    private readonly metrics: GatewayMetrics,
  ) {}

  /** The tools the credential may call, by name; with `readOnly`, only the operations that change nothing. */
  list(credential: Credential, options: ToolSelection = {}): Tool[] {
    return this.offered(options)
      .filter((operation) => visibilityRefusal(credential, operation) === null)
      .map(toolOf)
      .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  }

  /**
   * Runs a tool; never throws (a refusal or failure is an `isError` result). Logged, and counted as an
   * MCP tool call unless made for another surface (the account assistant). With `readOnly`, a tool that
   * writes is `tool_not_found`, as if it did not exist.
   */
  async call(name: string, args: Record<string, unknown> | undefined, caller: OperationCaller, options: ToolSelection = {}): Promise<CallToolResult> {
    const started = performance.now();
    const surface = options.surface ?? 'mcp';
    const operation = this.offered(options).find((candidate) => toolNameOf(candidate.name) === name);
    let status = 200;
    let code: string | null = null;
    try {
      if (!operation) throw new ApiError('tool_not_found', `No tool named ${name}`, { param: 'name' });
      const refusal = visibilityRefusal(caller.credential, operation);
      if (refusal) throw refusal;
      const result = await this.service.call(operation, splitCombinedInput(operation, args ?? {}), caller);
      status = operation.status ?? 200;
      // What the HTTP answer would carry: JSON, dates as strings.
      const json = JSON.parse(JSON.stringify(result ?? null)) as Record<string, unknown>;
      return { content: [{ type: 'text', text: JSON.stringify(json, null, 2) }], structuredContent: json };
    } catch (error) {
      const answer = errorAnswer(error, caller.requestId);
      status = answer.status;
      code = answer.code;
      if (answer.status >= 500) caller.logger.error({ err: error instanceof ApiError ? (error.cause ?? error) : error, tool: name }, `${LOG_NAMES[surface]} failed`);
      return { isError: true, content: [{ type: 'text', text: JSON.stringify(answer.toEnvelope()) }] };
    } finally {
      const tool = operation ? name : 'unknown';
      if (surface === 'mcp') this.metrics.observeToolCall(tool, status < 400 ? 'ok' : status < 500 ? 'refused' : 'failed');
      // The arguments are not logged: they may hold secrets and personal data; their field names say enough.
      caller.logger.info(
        { [surface]: { tool, fields: Object.keys(args ?? {}) }, credential: credentialLabel(caller.credential), status, code, durationMs: Math.round(performance.now() - started) },
        LOG_NAMES[surface],
      );
    }
  }

  private offered(options: ToolSelection): AnyOperation[] {
    return this.registry.list().filter((operation) => operation.mcp !== false && (!options.readOnly || operation.readOnly));
  }
}

/** Which tools, for whom. */
export interface ToolSelection {
  /** Only operations that change nothing (the account assistant's tools). */
  readonly readOnly?: boolean;
  /** Who calls: `/mcp` (counted in svc_mcp_tool_calls_total), or the account assistant. Default `mcp`. */
  readonly surface?: 'mcp' | 'assistant';
}

const LOG_NAMES = { mcp: 'MCP tool call', assistant: 'Assistant tool call' } as const;

/** Why the credential may not see or call the tool, or null: the operation's own checks, then `mcp:write` for a write. */
function visibilityRefusal(credential: Credential, operation: AnyOperation): ApiError | null {
  try {
    authorizeCredential(credential, operation);
  } catch (error) {
    if (error instanceof ApiError) return error;
    throw error;
  }
  return operation.readOnly ? null : scopeRefusal(credential, 'mcp:write');
}

function toolOf(operation: AnyOperation): Tool {
  const { input, output } = operationJsonSchemas(operation);
  return {
    name: toolNameOf(operation.name),
    title: operation.summary,
    description: operation.description ? `${operation.summary}\n\n${operation.description}` : operation.summary,
    inputSchema: input as Tool['inputSchema'],
    outputSchema: output as Tool['outputSchema'],
    annotations: {
      title: operation.summary,
      readOnlyHint: operation.readOnly,
      destructiveHint: !operation.readOnly && (operation.destructive ?? false),
      idempotentHint: operation.idempotent ?? operation.readOnly,
      // Operations act on this account only, never on the open world.
      openWorldHint: false,
    },
  };
}

function credentialLabel(credential: Credential): { kind: string; id: string } {
  if (credential.kind === 'key') return { kind: 'key', id: credential.keyId };
  // A connector acts for its person within one grant: the grant is what a revocation ends.
  if (credential.kind === 'connector') return { kind: 'connector', id: credential.grantId };
  return { kind: 'session', id: credential.sessionId };
}
