import { Ajv } from 'ajv';
import { zodResponseFormat } from 'openai/helpers/zod';
import t from 'tap';
import { z } from 'zod';
import type { ChatRequestBody, JsonObject, Provider } from '../../core/gateway/provider.ts';
import { mockProviderType } from '../../providers/mock/index.ts';
import { createProviderContext } from '../../providers/provider-context.ts';
import { callOptions as options, chunksOf, collect } from './provider-test-kit.ts';

/** `response_format: json_schema`: every answer validates against the schema it was asked for. */

const mock: Provider = mockProviderType.create('mock', mockProviderType.configSchema.parse({}), createProviderContext());
const ajv = new Ajv({ strict: false, allErrors: true });
// The formats the mock writes, checked by the shapes JSON Schema defines for them.
for (const [name, pattern] of Object.entries({
  'date-time': /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$/,
  date: /^\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])$/,
  time: /^\d{2}:\d{2}:\d{2}Z$/,
  email: /^[^@\s]+@[^@\s]+\.[a-z]+$/,
  uri: /^https?:\/\/[^\s]+$/,
  uuid: /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/,
  ipv4: /^(\d{1,3}\.){3}\d{1,3}$/,
  hostname: /^[a-z0-9.-]+$/,
})) {
  ajv.addFormat(name, pattern);
}

const request = (schema: JsonObject, extra: Partial<ChatRequestBody> = {}): ChatRequestBody => ({
  model: 'mock-small',
  messages: [{ role: 'user', content: 'Extract the details of the meeting with Alice on Friday' }],
  response_format: { type: 'json_schema', json_schema: { name: 'answer', schema, strict: true } },
  ...extra,
});

const schemas: Record<string, JsonObject> = {
  'flat object with enums and bounds': {
    type: 'object',
    additionalProperties: false,
    required: ['title', 'priority', 'attendees', 'confirmed', 'score'],
    properties: {
      title: { type: 'string', minLength: 3, maxLength: 20 },
      priority: { type: 'string', enum: ['low', 'medium', 'high'] },
      attendees: { type: 'integer', minimum: 2, maximum: 5 },
      confirmed: { type: 'boolean' },
      score: { type: 'number', exclusiveMinimum: 0, exclusiveMaximum: 1 },
    },
  },
  'nested objects and arrays with item bounds': {
    type: 'object',
    additionalProperties: false,
    required: ['meeting'],
    properties: {
      meeting: {
        type: 'object',
        additionalProperties: false,
        required: ['people', 'slots'],
        properties: {
          people: {
            type: 'array',
            minItems: 2,
            maxItems: 4,
            items: { type: 'object', required: ['name', 'email'], additionalProperties: false, properties: { name: { type: 'string' }, email: { type: 'string', format: 'email' } } },
          },
          slots: { type: 'array', items: { type: 'string', format: 'date-time' }, maxItems: 1 },
        },
      },
    },
  },
  'string formats, multipleOf and nullable types': {
    type: 'object',
    additionalProperties: false,
    required: ['id', 'day', 'at', 'link', 'host', 'ip', 'minutes', 'note'],
    properties: {
      id: { type: 'string', format: 'uuid' },
      day: { type: 'string', format: 'date' },
      at: { type: 'string', format: 'time' },
      link: { type: 'string', format: 'uri' },
      host: { type: 'string', format: 'hostname' },
      ip: { type: 'string', format: 'ipv4' },
      minutes: { type: 'integer', multipleOf: 15, minimum: 15, maximum: 120 },
      note: { type: ['string', 'null'] },
    },
  },
  'recursive $defs with anyOf, as zod and pydantic emit them': {
    type: 'object',
    additionalProperties: false,
    required: ['root'],
    properties: { root: { $ref: '#/$defs/node' } },
    $defs: {
      node: {
        type: 'object',
        additionalProperties: false,
        required: ['label', 'children', 'parent'],
        properties: {
          label: { type: 'string' },
          children: { type: 'array', items: { $ref: '#/$defs/node' } },
          parent: { anyOf: [{ $ref: '#/$defs/node' }, { type: 'null' }] },
        },
      },
    },
  },
  'allOf, const and unique items': {
    allOf: [
      { type: 'object', properties: { kind: { const: 'event' } }, required: ['kind'] },
      { type: 'object', properties: { tags: { type: 'array', uniqueItems: true, minItems: 3, items: { enum: ['a', 'b', 'c', 'd'] } } }, required: ['tags'] },
    ],
  },
  'a top-level array': { type: 'array', minItems: 1, items: { type: 'string', maxLength: 5 } },
};

for (const [name, schema] of Object.entries(schemas)) {
  t.test(`the answer is valid against a schema: ${name}`, async (t) => {
    const validate = ajv.compile(schema);
    for (const seed of [1, 2, 3]) {
      const { completion } = await mock.language!.chat(request(schema, { seed }), options());
      t.equal(completion.choices[0]!.finish_reason, 'stop');
      const value = JSON.parse(completion.choices[0]!.message.content as string);
      t.ok(validate(value), `seed ${seed}: ${JSON.stringify(validate.errors)}`);
    }
  });
}

t.test('the streamed answer joins into the same valid JSON', async (t) => {
  const schema = schemas['nested objects and arrays with item bounds']!;
  const { completion } = await mock.language!.chat(request(schema), options());
  const chunks = chunksOf(await collect(mock.language!.chatStream(request(schema), options())));
  const streamed = chunks.map((chunk) => chunk.choices[0]?.delta.content ?? '').join('');
  t.equal(streamed, completion.choices[0]!.message.content);
  t.ok(chunks.length > 10, 'streamed in many pieces');
});

t.test('tool-call arguments are valid against the tool’s parameters', async (t) => {
  const parameters = schemas['string formats, multipleOf and nullable types']!;
  const { completion } = await mock.language!.chat(
    { model: 'mock-small', messages: [{ role: 'user', content: 'call book_room' }], tools: [{ type: 'function', function: { name: 'book_room', parameters, strict: true } }] },
    options(),
  );
  const args = JSON.parse(completion.choices[0]!.message.tool_calls![0]!.function.arguments);
  t.ok(ajv.validate(parameters, args), JSON.stringify(ajv.errors));
});

t.test('a schema demanding endless output gets a bounded answer', async (t) => {
  const greedy = {
    type: 'object',
    required: ['rows', 'tree'],
    properties: {
      rows: { type: 'array', minItems: 1_000_000_000, items: { type: 'string', minLength: 1_000_000_000 } },
      tree: { $ref: '#/$defs/node' },
    },
    $defs: { node: { type: 'array', minItems: 50, items: { $ref: '#/$defs/node' } } },
  };
  const { completion } = await mock.language!.chat(request(greedy), options());
  const text = completion.choices[0]!.message.content as string;
  t.ok(text.length < 1_000_000, `${text.length} characters`);
  t.type(JSON.parse(text), 'object');
});

t.test('a zod schema sent by the openai SDK (zodResponseFormat) parses back with zod', async (t) => {
  const person = z.object({ name: z.string().min(2), email: z.email() });
  const event = z.object({
    title: z.string().max(40),
    kind: z.enum(['meeting', 'call']),
    day: z.iso.date(),
    starts: z.iso.datetime(),
    id: z.uuid(),
    people: z.array(person).min(1),
    room: z.number().int().min(1).max(9).nullable(),
    agenda: z.array(z.object({ topic: z.string(), minutes: z.number().int().positive() })),
  });
  const format = zodResponseFormat(event, 'event');
  for (const seed of [1, 2, 3, 4]) {
    const { completion } = await mock.language!.chat(request({}, { seed, response_format: format as unknown as JsonObject }), options());
    const parsed = event.safeParse(JSON.parse(completion.choices[0]!.message.content as string));
    t.ok(parsed.success, `seed ${seed}: ${parsed.error?.message ?? ''}`);
  }
});
