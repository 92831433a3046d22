import type { JsonObject, ResponsesRequestBody } from '../../core/gateway/provider.ts';
import { compileBodySchema } from '../../core/kernel/compiled-schema.ts';
import { ApiError } from '../../core/kernel/errors.ts';
import type { CatalogueModel } from './model-catalogue.ts';
// Catalogues the codes this module answers with (core/kernel/error-catalogue.ts).
import './inference-errors.ts';

/**
 * OpenAI's Responses API request as far as the gateway reads it: the model, what it must refuse
 * up front (hosted tools it cannot bill, work that outlives the call, state one upstream keeps),
 * the texts data guardrails read and the output bound it reserves. Every other field passes
 * through to the upstream untouched.
 */
export interface ParsedResponsesRequest extends ResponsesRequestBody {
  input?: string | JsonObject[];
  instructions?: string | null;
  max_output_tokens?: number | null;
  tools?: JsonObject[];
  tool_choice?: unknown;
  background?: boolean | null;
  previous_response_id?: string | null;
  conversation?: unknown;
}

export const responsesRequestSchema = {
  type: 'object',
  required: ['model'],
  properties: {
    model: { type: 'string' },
    input: { anyOf: [{ type: 'string' }, { type: 'array', items: { type: 'object' } }] },
    instructions: { type: ['string', 'null'] },
    stream: { type: ['boolean', 'null'] },
    background: { type: ['boolean', 'null'] },
    max_output_tokens: { type: ['integer', 'null'], minimum: 1 },
    previous_response_id: { type: ['string', 'null'] },
    tools: { type: 'array', items: { type: 'object', required: ['type'], properties: { type: { type: 'string' } } } },
  },
};

export const parseResponsesRequest = compileBodySchema<ParsedResponsesRequest>(responsesRequestSchema);

/** `web_search`, `web_search_preview` and their dated variants (`web_search_2025_08_26`). */
export const WEB_SEARCH_TOOL = /^web_search(?:_preview)?(?:_\d{4}_\d{2}_\d{2})?$/;

/** Tools the model runs in the client's code: the gateway only passes their definitions on. */
const CLIENT_TOOLS = new Set(['function', 'custom']);

/**
 * Hosted tools the upstream runs and bills on its own meter (storage, containers, images, a
 * browser): the gateway cannot price or reserve them, so it refuses them by name, dated variants
 * (`computer_use_preview_2025_03_11`) included. Any other tool type the gateway does not know is
 * refused the same way: it may cost money nobody here can see.
 */
const REFUSED_HOSTED_TOOL = /^(?:file_search|code_interpreter|shell|local_shell|hosted_shell|image_generation|computer_use(?:_preview)?)(?:_\d{4}_\d{2}_\d{2})?$/;

/** Whether the request offers the model a web search (and does not forbid every tool). */
export function offersWebSearch(body: ParsedResponsesRequest): boolean {
  return body.tool_choice !== 'none' && (body.tools ?? []).some((tool) => WEB_SEARCH_TOOL.test(String(tool['type'])));
}

/** Refuses, naming `tools[i]`, each tool this model cannot run through the gateway. */
export function checkResponsesTools(body: ParsedResponsesRequest, model: CatalogueModel): void {
  (body.tools ?? []).forEach((tool, index) => {
    const type = String(tool['type']);
    const param = `tools[${index}]`;
    if (CLIENT_TOOLS.has(type)) return;
    if (WEB_SEARCH_TOOL.test(type)) {
      if (model.builtinTools.webSearch) return;
      throw new ApiError(
        'unsupported_tool',
        `The model ${JSON.stringify(model.id)} does not offer the built-in tool ${JSON.stringify(type)}; GET /client/models lists each model's builtinTools`,
        {
          param,
        },
      );
    }
    const why = REFUSED_HOSTED_TOOL.test(type) ? 'is a hosted tool the gateway does not run' : 'is not a tool type the gateway knows';
    throw new ApiError('unsupported_tool', `The tool ${JSON.stringify(type)} ${why}; use function or custom tools (web_search where the model offers it)`, { param });
  });
}

/**
 * Refuses what no route can serve as one billed call: `background` work, which answers before it
 * is done and so can be neither billed exactly nor failed over, and state kept by one upstream
 * (`previous_response_id`, `conversation`) on a model whose routes span several providers, where
 * failover would send it to an upstream that has never seen it.
 */
export function checkResponsesServable(body: ParsedResponsesRequest, providersServing: number): void {
  if (body.background === true) {
    throw new ApiError('invalid_parameter', "'background' responses are not served: the gateway bills a call when it ends; leave it unset or false", { param: 'background' });
  }
  if (providersServing <= 1) return;
  for (const param of ['previous_response_id', 'conversation'] as const) {
    if (body[param] === undefined || body[param] === null) continue;
    throw new ApiError(
      'invalid_parameter',
      `'${param}' names state one upstream keeps, and this model is served by several: send the earlier items in 'input' instead, or use a model with one provider`,
      { param },
    );
  }
}

/** A value's texts mapped, or the value itself when none changed: a string, or parts with `text`. */
function mapContent(content: unknown, map: (text: string) => string): unknown {
  if (typeof content === 'string') return map(content);
  if (!Array.isArray(content)) return content;
  let out: unknown[] | null = null;
  content.forEach((part, index) => {
    if (part === null || typeof part !== 'object') return;
    const { type, text } = part as JsonObject;
    if (typeof text !== 'string' || (type !== 'input_text' && type !== 'output_text' && type !== 'text')) return;
    const mapped = map(text);
    if (mapped !== text) (out ??= [...content])[index] = { ...(part as JsonObject), text: mapped };
  });
  return out ?? content;
}

/**
 * The texts data guardrails read: `instructions`, a string `input`, and in input items each
 * message's content (a string or its input_text/output_text parts) and each function call's output.
 */
export function mapResponsesInputTexts(body: ParsedResponsesRequest, map: (text: string) => string): ParsedResponsesRequest {
  let out = body;
  if (typeof body.instructions === 'string') {
    const mapped = map(body.instructions);
    if (mapped !== body.instructions) out = { ...out, instructions: mapped };
  }
  const input = body.input;
  if (typeof input === 'string') {
    const mapped = map(input);
    return mapped === input ? out : { ...out, input: mapped };
  }
  if (!Array.isArray(input)) return out;
  let items: JsonObject[] | null = null;
  input.forEach((item, index) => {
    const field = item['type'] === 'function_call_output' ? 'output' : 'content';
    if (field === 'content' && item['role'] === undefined && item['type'] !== 'message') return;
    const value = item[field];
    const mapped = mapContent(value, map);
    if (mapped !== value) (items ??= [...input])[index] = { ...item, [field]: mapped };
  });
  return items ? { ...out, input: items } : out;
}
