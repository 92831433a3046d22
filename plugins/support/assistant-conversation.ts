import type { GatewayCalls } from '../../core/gateway/gateway-calls.ts';
import type { OperationCaller } from '../../core/operations/operation-service.ts';
import type { OperationTools } from '../../core/operations/operation-tools.ts';
import { ApiError } from '../../core/kernel/errors.ts';
import { callGateway } from './assistant-gateway.ts';

export const ASSISTANT_INSTRUCTIONS = [
  'You are the account assistant of this AI gateway and management platform.',
  "Answer the user's questions about their account (keys, projects, usage and spend, credits, budgets, models, settings) using the tools.",
  "Each tool reads the account with the user's own credential: it shows exactly what they may see and changes nothing.",
  'When a tool refuses, say what it refused and why (its error message names a missing scope or role); never guess figures.',
  'Be brief, and quote numbers as the tools give them.',
].join(' ');

export interface ConversationSettings {
  model: string;
  maxToolRounds: number;
  maxToolResultCharacters: number;
}

export interface Turn {
  role: 'user' | 'assistant';
  content: string;
}

export interface ToolCallRecord {
  name: string;
  arguments: Record<string, unknown>;
  ok: boolean;
  /** The refusal's code when the tool refused (a missing scope, an unknown id); null when it answered. */
  errorCode: string | null;
}

export interface Conversation {
  model: string;
  content: string;
  toolCalls: ToolCallRecord[];
  requestIds: string[];
  usage: { calls: number; inputTokens: number; outputTokens: number };
}

interface ModelToolCall {
  id: string;
  function: { name: string; arguments: string };
}

/**
 * The assistant's loop: ask the model with the caller's read-only operations as tools, run the tools
 * it asks for with the caller's own credential (through the operation service, so exactly what the
 * caller may read), hand the results back, and repeat, at most `maxToolRounds` times; the last round
 * offers no tool, so the model answers in words. Every round is a gateway call, billed and logged
 * like a /v1 call. A tool's refusal is a result the model reads, never the assistant's failure.
 */
export async function converse(
  deps: { gateway: GatewayCalls; tools: OperationTools },
  caller: OperationCaller,
  turns: readonly Turn[],
  settings: ConversationSettings,
): Promise<Conversation> {
  const offered = deps.tools.list(caller.credential, { readOnly: true }).map((tool) => ({
    type: 'function',
    function: { name: tool.name, description: tool.description ?? tool.title ?? tool.name, parameters: tool.inputSchema },
  }));
  const messages: Array<Record<string, unknown>> = [{ role: 'system', content: ASSISTANT_INSTRUCTIONS }, ...turns.map((turn) => ({ ...turn }))];
  const outcome: Conversation = { model: settings.model, content: '', toolCalls: [], requestIds: [], usage: { calls: 0, inputTokens: 0, outputTokens: 0 } };
  for (let round = 0; ; round += 1) {
    const mayUseTools = offered.length > 0 && round < settings.maxToolRounds;
    const body = { model: settings.model, messages, ...(offered.length > 0 ? { tools: offered, tool_choice: mayUseTools ? 'auto' : 'none' } : {}) };
    const answer = await callGateway(deps.gateway, caller.credential, '/v1/chat/completions', body, ['model', 'messages']);
    outcome.requestIds.push(answer.requestId);
    addUsage(outcome, answer.body['usage']);
    const message = (answer.body['choices'] as Array<{ message?: Record<string, unknown> }> | undefined)?.[0]?.message;
    if (!message) throw new ApiError('assistant_model_failed');
    const calls = (message['tool_calls'] as ModelToolCall[] | undefined) ?? [];
    if (calls.length === 0 || !mayUseTools) {
      outcome.content = typeof message['content'] === 'string' ? message['content'] : '';
      return outcome;
    }
    messages.push({ role: 'assistant', content: message['content'] ?? null, tool_calls: calls });
    for (const call of calls) {
      const { record, content } = await runTool(deps.tools, caller, call, settings.maxToolResultCharacters);
      outcome.toolCalls.push(record);
      messages.push({ role: 'tool', tool_call_id: call.id, content });
    }
  }
}

async function runTool(tools: OperationTools, caller: OperationCaller, call: ModelToolCall, maxCharacters: number): Promise<{ record: ToolCallRecord; content: string }> {
  const name = call.function?.name ?? '';
  let args: unknown;
  try {
    args = JSON.parse(call.function?.arguments || '{}');
  } catch {
    args = null;
  }
  if (typeof args !== 'object' || args === null || Array.isArray(args)) {
    const envelope = new ApiError('invalid_parameter', 'The tool arguments were not a JSON object').toEnvelope();
    return { record: { name, arguments: {}, ok: false, errorCode: 'invalid_parameter' }, content: JSON.stringify(envelope) };
  }
  const given = args as Record<string, unknown>;
  const result = await tools.call(name, given, caller, { readOnly: true, surface: 'assistant' });
  const first = result.content[0];
  const text = result.isError ? (first?.type === 'text' ? first.text : '{}') : JSON.stringify(result.structuredContent ?? null);
  const error = result.isError ? (JSON.parse(text) as { error?: { code?: string } }).error : undefined;
  const record = { name, arguments: given, ok: !result.isError, errorCode: result.isError ? (error?.code ?? 'internal_error') : null };
  return { record, content: text.length > maxCharacters ? `${text.slice(0, maxCharacters)} …[cut: ${text.length - maxCharacters} more characters]` : text };
}

function addUsage(outcome: Conversation, usage: unknown): void {
  outcome.usage.calls += 1;
  if (typeof usage !== 'object' || usage === null) return;
  const { prompt_tokens: input, completion_tokens: output } = usage as { prompt_tokens?: unknown; completion_tokens?: unknown };
  if (typeof input === 'number') outcome.usage.inputTokens += input;
  if (typeof output === 'number') outcome.usage.outputTokens += output;
}
