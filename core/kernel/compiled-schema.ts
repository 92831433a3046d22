import { Ajv, type ErrorObject } from 'ajv';
import { ApiError } from './errors.ts';

/**
 * Request bodies that pass through to upstreams (the /v1 surface) are checked against a JSON
 * Schema compiled once into plain JavaScript: a few hundred nanoseconds per call, where a zod tree
 * would rebuild the body. Such schemas describe the fields the service knows and leave others
 * alone (no `additionalProperties: false`), so fields an upstream adds later keep passing through.
 * Nothing is coerced or defaulted: the body the handler gets is the body the caller sent.
 *
 * The management surface validates with zod instead (core/operations/operations.ts), where every field is
 * known and the schema also documents the operation; both answer 400 in the same envelope.
 */
const ajv = new Ajv({
  // Strict about the schemas themselves (a typo in a keyword is a boot error), not about `required`
  // naming a property that only a subschema describes.
  strict: true,
  strictRequired: false,
  allowUnionTypes: true,
  discriminator: true,
  // Messages are written here, from the keyword and its parameters.
  messages: false,
  // Each referenced subschema stays a function of its own: one function holding a whole large
  // schema grows past what V8 optimises, and then runs several times slower.
  inlineRefs: false,
});

export type JsonSchema = Record<string, unknown>;

/**
 * Compiles `schema` into a check that returns the body typed as T or throws a 400 in the
 * envelope: `invalid_parameter` with `param` the field's path as the caller wrote it
 * (`messages[2].content`), or `invalid_body` when the body itself is not an object.
 */
export function compileBodySchema<T>(schema: JsonSchema): (body: unknown) => T {
  const validate = ajv.compile(schema);
  return (body) => {
    if (validate(body)) return body as T;
    throw bodyError(schema, body, validate.errors ?? []);
  };
}

/** Keywords that only report that a subschema failed; the subschema's own error says more. */
const COMBINATORS = new Set(['if', 'anyOf', 'oneOf', 'allOf', 'not']);

function bodyError(schema: JsonSchema, body: unknown, errors: readonly ErrorObject[]): ApiError {
  const error = errors.find((e) => !COMBINATORS.has(e.keyword)) ?? errors[0];
  if (!error) return new ApiError('invalid_body', 'Invalid body');
  const segments = pointerSegments(error.instancePath);
  const params = error.params as Record<string, unknown>;
  if (error.keyword === 'required') segments.push(String(params.missingProperty));
  if (error.keyword === 'additionalProperties') segments.push(String(params.additionalProperty));
  if (error.keyword === 'discriminator') segments.push(String(params.tag));
  const param = segments.length > 0 ? fieldPath(body, segments) : null;
  const message = describe(error, params, schema, valueAt(body, segments));
  if (!param) return new ApiError('invalid_body', `Invalid body: ${message}`);
  return new ApiError('invalid_parameter', `Invalid '${param}' in body: ${message}`, { param });
}

function describe(error: ErrorObject, params: Record<string, unknown>, schema: JsonSchema, value: unknown): string {
  switch (error.keyword) {
    case 'type':
      return `expected ${[params.type].flat().join(' or ')}, got ${jsonType(value)}`;
    case 'required':
      return 'this field is required';
    case 'additionalProperties':
      return 'this field is not allowed here';
    case 'const':
      return `must be ${JSON.stringify(params.allowedValue)}`;
    case 'enum':
      return `must be one of ${(params.allowedValues as unknown[]).map((v) => JSON.stringify(v)).join(', ')}`;
    case 'minimum':
    case 'maximum':
    case 'exclusiveMinimum':
    case 'exclusiveMaximum':
      return `must be ${String(params.comparison)} ${String(params.limit)}`;
    case 'minItems':
      return `must hold at least ${String(params.limit)} item(s)`;
    case 'maxItems':
      return `must hold at most ${String(params.limit)} item(s)`;
    case 'minLength':
      return `must be at least ${String(params.limit)} character(s) long`;
    case 'maxLength':
      return `must be at most ${String(params.limit)} characters long`;
    case 'discriminator': {
      if (params.error === 'tag') return `expected a string, got ${jsonType(value)}`;
      const union = schemaAt(schema, error.schemaPath.replace(/\/discriminator$/, ''));
      const tags = ((union?.oneOf as JsonSchema[] | undefined) ?? []).map((branch) => (branch.properties as Record<string, JsonSchema>)[String(params.tag)]?.const);
      return `must be one of ${tags.map((tag) => JSON.stringify(tag)).join(', ')}`;
    }
    default:
      return `does not satisfy '${error.keyword}'`;
  }
}

const jsonType = (value: unknown) => (value === null ? 'null' : Array.isArray(value) ? 'array' : typeof value === 'undefined' ? 'nothing' : typeof value);

/** JSON Pointer (`/messages/2/content`) to its unescaped segments. */
function pointerSegments(pointer: string): string[] {
  if (pointer === '') return [];
  return pointer
    .slice(1)
    .split('/')
    .map((segment) => segment.replace(/~1/g, '/').replace(/~0/g, '~'));
}

/** `messages[2].content`: indexes where the body holds an array there, names elsewhere. */
function fieldPath(body: unknown, segments: readonly string[]): string {
  let path = '';
  let node = body;
  for (const segment of segments) {
    path += Array.isArray(node) ? `[${segment}]` : path === '' ? segment : `.${segment}`;
    node = node !== null && typeof node === 'object' ? (node as Record<string, unknown>)[segment] : undefined;
  }
  return path;
}

function valueAt(body: unknown, segments: readonly string[]): unknown {
  let node = body;
  for (const segment of segments) node = node !== null && typeof node === 'object' ? (node as Record<string, unknown>)[segment] : undefined;
  return node;
}

/** The subschema at a schema path such as `#/properties/messages/items`. */
function schemaAt(schema: JsonSchema, schemaPath: string): JsonSchema | undefined {
  let node: unknown = schema;
  for (const segment of pointerSegments(schemaPath.replace(/^#/, ''))) {
    node = node !== null && typeof node === 'object' ? (node as Record<string, unknown>)[segment] : undefined;
  }
  return node as JsonSchema | undefined;
}
