import type { JsonSchema } from '../../core/kernel/compiled-schema.ts';

/**
 * The shape of an OpenAI chat-completions request, as far as OpenAI documents it (the request
 * types of the official SDK): every field the service or a provider reads, and the documented
 * type and range of the common ones. Objects stay open: a field not named here passes through to
 * the upstream untouched, so new OpenAI fields and provider-specific ones keep working. Content
 * part types, tool types and response formats not named here pass too; the known ones must have
 * their documented shape. How deeply a body nests is bounded before this runs (core/http/json-body-parser.ts).
 */

const string = { type: 'string' };
const nullableString = { type: ['string', 'null'] };
const nullableBoolean = { type: ['boolean', 'null'] };
const object = { type: 'object' };
const nullableObject = { type: ['object', 'null'] };
const nullableNumber = (minimum: number, maximum: number) => ({ type: ['number', 'null'], minimum, maximum });
const nullableInteger = (minimum?: number, maximum?: number) => ({
  type: ['integer', 'null'],
  ...(minimum === undefined ? {} : { minimum }),
  ...(maximum === undefined ? {} : { maximum }),
});

/**
 * Shared parts are referenced, not repeated: each becomes one small compiled function (see
 * compileBodySchema), where a schema written out in full compiles into one function too large for
 * V8 to optimise.
 */
const ref = (name: string) => ({ $ref: `#/$defs/${name}` });

/** When `type` is `tag`, the object must also have these fields, of these shapes. */
function whenType(tag: string, fields: Record<string, JsonSchema>): JsonSchema {
  return { if: { required: ['type'], properties: { type: { const: tag } } }, then: { required: Object.keys(fields), properties: fields } };
}

const namedFunction = { type: 'object', required: ['name'], properties: { name: string } };

const contentPart = {
  type: 'object',
  required: ['type'],
  properties: { type: string },
  allOf: [
    whenType('text', { text: string }),
    whenType('image_url', { image_url: { type: 'object', required: ['url'], properties: { url: string, detail: string } } }),
    whenType('input_audio', { input_audio: { type: 'object', required: ['data', 'format'], properties: { data: string, format: string } } }),
    whenType('file', { file: { type: 'object', properties: { file_data: string, file_id: string, filename: string } } }),
    whenType('refusal', { refusal: string }),
  ],
};

/** A string, or an array of content parts. */
const content = { type: ['string', 'array'], items: ref('contentPart') };

/** Only function calls: the gateway counts their name and arguments. */
const toolCall = {
  type: 'object',
  required: ['id', 'type', 'function'],
  properties: {
    id: string,
    type: { const: 'function' },
    function: { type: 'object', required: ['name', 'arguments'], properties: { name: string, arguments: string } },
  },
};

const functionCall = { type: 'object', required: ['name', 'arguments'], properties: { name: string, arguments: string } };

const message = {
  type: 'object',
  required: ['role'],
  discriminator: { propertyName: 'role' },
  oneOf: [
    { properties: { role: { const: 'system' }, content, name: string }, required: ['content'] },
    { properties: { role: { const: 'developer' }, content, name: string }, required: ['content'] },
    { properties: { role: { const: 'user' }, content, name: string }, required: ['content'] },
    {
      properties: {
        role: { const: 'assistant' },
        content: { type: ['string', 'array', 'null'], items: ref('contentPart') },
        name: string,
        refusal: nullableString,
        // null is taken as absent: SDKs echo an answer's message back with it.
        tool_calls: { type: ['array', 'null'], items: ref('toolCall') },
        function_call: { type: ['object', 'null'], required: ['name', 'arguments'], properties: functionCall.properties },
        audio: { type: ['object', 'null'], required: ['id'], properties: { id: string } },
      },
      // content may be null or absent only when the message carries calls (or audio) instead.
      if: {
        not: {
          anyOf: [
            { required: ['tool_calls'], properties: { tool_calls: { not: { type: 'null' } } } },
            { required: ['function_call'], properties: { function_call: { not: { type: 'null' } } } },
            { required: ['audio'], properties: { audio: { not: { type: 'null' } } } },
          ],
        },
      },
      then: { required: ['content'], properties: { content: { type: ['string', 'array'] } } },
    },
    { properties: { role: { const: 'tool' }, content, tool_call_id: string }, required: ['content', 'tool_call_id'] },
    { properties: { role: { const: 'function' }, content: nullableString, name: string }, required: ['name', 'content'] },
  ],
};

const tool = {
  type: 'object',
  required: ['type'],
  properties: { type: string },
  allOf: [
    whenType('function', {
      function: {
        type: 'object',
        required: ['name'],
        properties: { name: string, description: string, parameters: object, strict: nullableBoolean },
      },
    }),
    whenType('custom', { custom: namedFunction }),
  ],
};

const toolChoice = {
  type: ['string', 'object'],
  allOf: [
    { if: { type: 'string' }, then: { enum: ['none', 'auto', 'required'] } },
    { if: { type: 'object' }, then: { required: ['type'], properties: { type: string } } },
    whenType('function', { function: namedFunction }),
    whenType('custom', { custom: namedFunction }),
    whenType('allowed_tools', { allowed_tools: { type: 'object', required: ['mode', 'tools'], properties: { mode: string, tools: { type: 'array', items: object } } } }),
  ],
};

const responseFormat = {
  type: 'object',
  required: ['type'],
  properties: { type: string },
  allOf: [
    whenType('json_schema', {
      json_schema: { type: 'object', required: ['name'], properties: { name: string, description: string, schema: object, strict: nullableBoolean } },
    }),
  ],
};

export const chatRequestSchema: JsonSchema = {
  $defs: { message, contentPart, toolCall, tool, toolChoice, responseFormat },
  type: 'object',
  required: ['model', 'messages'],
  properties: {
    // No served model has a longer name (config caps them at 200).
    model: { type: 'string', minLength: 1, maxLength: 200 },
    messages: { type: 'array', minItems: 1, items: ref('message') },
    stream: nullableBoolean,
    stream_options: { type: ['object', 'null'], properties: { include_usage: nullableBoolean, include_obfuscation: nullableBoolean } },
    max_tokens: nullableInteger(1),
    max_completion_tokens: nullableInteger(1),
    temperature: nullableNumber(0, 2),
    top_p: nullableNumber(0, 1),
    n: nullableInteger(1, 128),
    presence_penalty: nullableNumber(-2, 2),
    frequency_penalty: nullableNumber(-2, 2),
    logit_bias: { type: ['object', 'null'], additionalProperties: { type: 'number', minimum: -100, maximum: 100 } },
    logprobs: nullableBoolean,
    top_logprobs: nullableInteger(0, 20),
    seed: nullableInteger(),
    stop: { type: ['string', 'array', 'null'], items: string },
    tools: { type: 'array', items: ref('tool') },
    tool_choice: ref('toolChoice'),
    parallel_tool_calls: { type: 'boolean' },
    functions: { type: 'array', items: { type: 'object', required: ['name'], properties: { name: string, description: string, parameters: object } } },
    function_call: {
      type: ['string', 'object'],
      allOf: [
        { if: { type: 'string' }, then: { enum: ['none', 'auto'] } },
        { if: { type: 'object' }, then: namedFunction },
      ],
    },
    response_format: ref('responseFormat'),
    user: string,
    safety_identifier: nullableString,
    prompt_cache_key: nullableString,
    metadata: { type: ['object', 'null'], additionalProperties: string },
    store: nullableBoolean,
    modalities: { type: ['array', 'null'], items: string },
    audio: nullableObject,
    prediction: { type: ['object', 'null'], required: ['type', 'content'], properties: { type: string, content } },
    reasoning_effort: nullableString,
    service_tier: nullableString,
    verbosity: nullableString,
    web_search_options: object,
  },
};
