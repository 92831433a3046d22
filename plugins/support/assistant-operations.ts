import { z } from 'zod';
import type { GatewayCalls } from '../../core/gateway/gateway-calls.ts';
import { ApiError } from '../../core/kernel/errors.ts';
import { type AnyOperation, defineOperation } from '../../core/operations/operations.ts';
import type { OperationTools } from '../../core/operations/operation-tools.ts';
import { sniffContentType } from '../../core/services/content-sniffing.ts';
import { converse } from './assistant-conversation.ts';
import { callGateway, PASSED_THROUGH } from './assistant-gateway.ts';
import type { SupportConfig } from './support-config.ts';

export interface AssistantDeps {
  gateway: GatewayCalls;
  tools: OperationTools;
  settings: SupportConfig['assistant'];
}

const modelField = z.string().min(1).max(200).optional();

const turns = z
  .array(z.strictObject({ role: z.enum(['user', 'assistant']), content: z.string().min(1).max(32_000) }))
  .min(1)
  .max(50)
  .refine((list) => list.at(-1)?.role === 'user', { message: "the last message must be the user's question" })
  .describe('The conversation so far, oldest first, ending with the question; the client keeps it between calls');

export const assistantReplyView = z
  .object({
    object: z.literal('assistant.reply'),
    model: z.string(),
    message: z.object({ role: z.literal('assistant'), content: z.string() }),
    toolCalls: z
      .array(
        z.object({
          name: z.string().describe('The operation the model asked for, as its MCP tool name'),
          arguments: z.record(z.string(), z.unknown()),
          ok: z.boolean(),
          errorCode: z.string().nullable().describe("The refusal's code when the tool refused (missing_scope: the caller may not read it)"),
        }),
      )
      .describe('Every read the assistant made, in order, with the caller’s own credential'),
    requestIds: z.array(z.string()).describe('Its gateway calls, as the request log names them; each is billed like a /v1 call'),
    usage: z.object({ calls: z.number().int(), inputTokens: z.number().int(), outputTokens: z.number().int() }),
  })
  .meta({ id: 'AssistantReply', description: "The assistant's answer, with the reads it made and the calls it was billed for" });

export const assistantImageView = z
  .object({
    object: z.literal('assistant.image'),
    model: z.string(),
    prompt: z.string(),
    revisedPrompt: z.string().nullable(),
    contentType: z.string().describe('Read from the image itself'),
    b64Json: z.string().nullable().describe('The image, base64; null when the model answered a URL'),
    url: z.string().nullable().describe("Where the image is, when the model answered a URL instead of the image's bytes"),
    requestId: z.string().describe('The gateway call, as the request log names it; billed like POST /v1/images/generations'),
  })
  .meta({ id: 'AssistantImage', description: 'One image drawn from a prompt, and the call it was billed as' });

const BILLED =
  'Billed like a /v1 call (credit, spend caps, rate limits, guardrails, the request log): to the key that calls it, or for a person to the organisation (no key or project; owners and admins see those calls in GET /client/requests).';

export function assistantOperations(deps: AssistantDeps): AnyOperation[] {
  const { gateway, tools, settings } = deps;

  const messages = defineOperation({
    name: 'assistant.messages',
    method: 'POST',
    path: '/assistant/messages',
    summary: 'Ask the account assistant a question about the account',
    description: `The assistant answers with the gateway's own models (\`plugins.support.assistant.model\` unless \`model\` names another the caller may use), reading the account through the caller's read-only operations as tools (the MCP tools, run with the caller's own credential: it sees exactly what the caller may, and never writes), in at most ${settings.maxToolRounds} rounds of tool calls before it must answer in words. Every round is one chat completion. ${BILLED} Takes the inference scope, as /v1 does. Not streamed; the conversation is not stored: send the turns so far with each question.`,
    scope: 'inference',
    wide: true,
    readOnly: false,
    body: z.strictObject({ messages: turns, model: modelField.describe('A chat model of GET /client/models; default the configured assistant model') }),
    errors: [...PASSED_THROUGH, 'assistant_model_failed'],
    output: assistantReplyView,
    async handler({ body }, { credential, requestId, logger, clientAddress }) {
      const model = body.model ?? settings.model;
      const answer = await converse({ gateway, tools }, { credential, requestId, logger, clientAddress }, body.messages, {
        model,
        maxToolRounds: settings.maxToolRounds,
        maxToolResultCharacters: settings.maxToolResultCharacters,
      });
      return {
        object: 'assistant.reply' as const,
        model: answer.model,
        message: { role: 'assistant' as const, content: answer.content },
        toolCalls: answer.toolCalls,
        requestIds: answer.requestIds,
        usage: answer.usage,
      };
    },
  });

  const images = defineOperation({
    name: 'assistant.images',
    method: 'POST',
    path: '/assistant/images',
    summary: 'Draw one image from a prompt with the configured image model',
    description: `The console's "generate an image" helper (an icon for an app, an illustration for a page): one image from \`plugins.support.assistant.imageModel\` unless \`model\` names another image model the caller may use, through the gateway as POST /v1/images/generations would draw it, answered inline as base64 with its type read from its bytes. ${BILLED} Takes the inference scope. Programs that draw images call /v1/images/generations itself.`,
    scope: 'inference',
    wide: true,
    readOnly: false,
    body: z.strictObject({
      prompt: z.string().trim().min(1).max(4_000).describe('What to draw'),
      size: z.string().min(1).max(20).optional().describe("One of the model's sizes (GET /client/models), e.g. 1024x1024; default the model's"),
      model: modelField.describe('An image model of GET /client/models; default the configured one'),
    }),
    errors: [...PASSED_THROUGH, 'assistant_model_failed'],
    output: assistantImageView,
    async handler({ body }, { credential }) {
      const model = body.model ?? settings.imageModel;
      const request = { model, prompt: body.prompt, n: 1, response_format: 'b64_json', ...(body.size ? { size: body.size } : {}) };
      const answer = await callGateway(gateway, credential, '/v1/images/generations', request, ['model', 'prompt', 'size']);
      const image = (answer.body['data'] as Array<{ b64_json?: unknown; url?: unknown; revised_prompt?: unknown }> | undefined)?.[0];
      const b64Json = typeof image?.b64_json === 'string' ? image.b64_json : null;
      const url = typeof image?.url === 'string' ? image.url : null;
      if (b64Json === null && url === null) throw new ApiError('assistant_model_failed');
      const head = b64Json !== null ? Buffer.from(b64Json.slice(0, 5_464), 'base64') : Buffer.alloc(0);
      return {
        object: 'assistant.image' as const,
        model,
        prompt: body.prompt,
        revisedPrompt: typeof image?.revised_prompt === 'string' ? image.revised_prompt : null,
        contentType: b64Json !== null ? sniffContentType(head) : 'application/octet-stream',
        b64Json,
        url: b64Json === null ? url : null,
        requestId: answer.requestId,
      };
    },
  });

  return [messages, images];
}
