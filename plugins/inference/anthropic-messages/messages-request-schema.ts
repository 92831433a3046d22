import type { JsonSchema } from '../../../core/kernel/compiled-schema.ts';

/**
 * The shape of an Anthropic Messages API request, as far as the translation reads it. Unlike the
 * chat route, the top level is closed: a field this route does not translate could not reach any
 * upstream, so naming it is refused (as Anthropic's own API refuses unknown fields) rather than
 * silently lost. Content blocks and tools are checked by the translation, which names the block.
 */

const string = { type: 'string' };
const nonEmptyString = { type: 'string', minLength: 1 };
const ref = (name: string) => ({ $ref: `#/$defs/${name}` });

const block = { type: 'object', required: ['type'], properties: { type: string } };

const message = {
  type: 'object',
  required: ['role', 'content'],
  properties: {
    role: { enum: ['user', 'assistant'] },
    content: { type: ['string', 'array'], items: ref('block') },
  },
  additionalProperties: false,
};

export const messagesRequestSchema: JsonSchema = {
  type: 'object',
  required: ['model', 'max_tokens', 'messages'],
  properties: {
    model: nonEmptyString,
    max_tokens: { type: 'integer', minimum: 1 },
    messages: { type: 'array', items: ref('message') },
    system: { type: ['string', 'array'], items: ref('block') },
    stop_sequences: { type: 'array', items: string },
    temperature: { type: 'number', minimum: 0, maximum: 1 },
    top_p: { type: 'number', minimum: 0, maximum: 1 },
    top_k: { type: 'integer', minimum: 0 },
    stream: { type: 'boolean' },
    tools: { type: 'array', items: { type: 'object', required: ['name'], properties: { name: nonEmptyString, type: string } } },
    tool_choice: {
      type: 'object',
      required: ['type'],
      properties: { type: { enum: ['auto', 'any', 'tool', 'none'] }, name: string, disable_parallel_tool_use: { type: 'boolean' } },
    },
    metadata: { type: 'object', properties: { user_id: { type: ['string', 'null'] } }, additionalProperties: false },
    thinking: { type: 'object', required: ['type'], properties: { type: string } },
  },
  additionalProperties: false,
  $defs: { message, block },
};
