import { z } from 'zod';
import { operationErrors, type OperationError } from '../operations/operation-errors.ts';
import { type AnyOperation, type OperationOwner, toolNameOf } from '../operations/operations.ts';
import { SCOPES } from '../identity/scopes.ts';

/**
 * The OpenAPI 3.1 document of a management surface, built from the operation registry, for a
 * generated client to be pleasant with: every answer is a named schema (`components.schemas`,
 * named by the views' `.meta({ id })`), every error code the operation can answer listed with an
 * example (the error catalogue), operations grouped by the
 * plugin that declared them (tags), and paths relative to the surface (servers). The lint gate
 * (test/core/openapi-lint.test.ts) keeps it clean under Redocly's and Spectral's recommendations.
 */

type JsonSchema = Record<string, unknown>;

export interface OpenApiOptions {
  /** The management surface the document describes (`/client`, or the regional `/platform/v1`): the same operations under either. */
  prefix: string;
  /** `server.publicUrl`: offered as a second, absolute server when set. */
  publicUrl?: string | undefined;
  /** The plugin that declared an operation (OperationRegistry.ownerOf): its tag. */
  ownerOf?: (operationName: string) => OperationOwner | undefined;
}

const SCHEMA_PREFIX = '#/components/schemas/';
const EXAMPLE_PREFIX = '#/components/examples/';
const schemaRef = (id: string) => `${SCHEMA_PREFIX}${id}`;

/** Formats a generator knows (OpenAPI's registry and JSON Schema's); anything else is a bug in a schema. */
const STANDARD_FORMATS = new Set([
  'date-time',
  'date',
  'time',
  'duration',
  'email',
  'uri',
  'uri-reference',
  'uuid',
  'hostname',
  'ipv4',
  'ipv6',
  'int32',
  'int64',
  'float',
  'double',
  'byte',
  'binary',
  'password',
  'regex',
]);

const errorSchema: JsonSchema = {
  type: 'object',
  description: 'The error envelope every failure is answered with',
  required: ['error'],
  properties: {
    error: {
      type: 'object',
      required: ['message', 'type', 'code', 'param'],
      properties: {
        message: { type: 'string', description: 'What went wrong, for a person to read' },
        type: { type: 'string', description: 'The class of error, e.g. invalid_request_error' },
        code: { type: 'string', description: 'A stable identifier of the error, for a program to branch on' },
        param: { type: ['string', 'null'], description: 'The input field at fault, when there is one' },
      },
    },
  },
};

/** How each error status is described; the codes an operation answers with it follow. */
const STATUS_TITLES: Record<number, string> = {
  400: 'Malformed input; the message and param name the field',
  401: 'Missing or invalid credential',
  402: 'Not enough credit, or a spend cap reached',
  403: 'The credential lacks the scope or role this needs',
  404: 'No such resource, or none the caller may see',
  409: 'Conflicts with the state of the resource',
  413: 'The request body is over its limit',
  415: 'The request body is not of a type this takes',
  429: 'Too many requests; retry after the time retry-after names',
  502: 'An upstream (a model) could not be reached; it is safe to retry',
};

/** One example per catalogued error; an error's status is part of its name only where one code has two (key_revoked: 401, 409). */
const exampleName = (error: OperationError, statusesOfCode: ReadonlyMap<string, ReadonlySet<number>>) =>
  (statusesOfCode.get(error.code)?.size ?? 1) > 1 ? `${error.code}_${error.status}` : error.code;

/**
 * The error responses an operation documents: one per status among its errors (core/operations/operation-errors.ts:
 * what its handler declares and what the kernel implies from the rest of its declaration), each the
 * Error envelope, its description naming the codes and one shared example per code, so a generated
 * client can branch on `error.code` knowing which ones this call can answer.
 */
export function errorResponsesFor(operation: AnyOperation, exampleOf: (error: OperationError) => string): Record<string, unknown> {
  const byStatus = new Map<number, OperationError[]>();
  for (const error of operationErrors(operation)) byStatus.set(error.status, [...(byStatus.get(error.status) ?? []), error]);
  return Object.fromEntries(
    [...byStatus].map(([status, errors]) => [
      String(status),
      {
        description: `${STATUS_TITLES[status] ?? 'Error'}: ${errors.map((error) => error.code).join(', ')}`,
        content: {
          'application/json': {
            schema: { $ref: schemaRef('Error') },
            examples: Object.fromEntries(errors.map((error) => [error.code, { $ref: `${EXAMPLE_PREFIX}${exampleOf(error)}` }])),
          },
        },
      },
    ]),
  );
}

/**
 * Every named schema (zod's global registry: `.meta({ id })`) as JSON Schema, references between
 * them as `#/components/schemas/<id>`. Answers are described as the service writes them (`output`).
 */
function namedSchemas(): Record<string, JsonSchema> {
  const { schemas } = z.toJSONSchema(z.globalRegistry, { target: 'draft-2020-12', io: 'output', unrepresentable: 'any', uri: schemaRef });
  const out: Record<string, JsonSchema> = {};
  for (const [id, schema] of Object.entries(schemas)) {
    if (id === '__shared') throw new Error('A named schema refers to a schema outside the registry: name it too');
    const { $schema: _schema, $id: _id, ...rest } = schema as JsonSchema;
    out[id] = rest;
  }
  return out;
}

/** The name of an operation's answer, checked to be the one schema of that name. */
function outputName(operation: AnyOperation): string {
  const id = z.globalRegistry.get(operation.output)?.id;
  if (!id) throw new Error(`${operation.name}: name its output schema (.meta({ id: 'Noun' })), declared once at module level`);
  if (z.globalRegistry._idmap.get(id) !== operation.output) {
    throw new Error(`${operation.name}: two schemas are named ${id}; declare a named schema once, at module level, and give other shapes other names`);
  }
  return id;
}

/** An input (path, query, body), inline: described as a caller writes it (`input`). */
function inputSchema(schema: z.ZodType, where: string): JsonSchema {
  const { $schema: _ignored, ...rest } = z.toJSONSchema(schema, { target: 'draft-2020-12', unrepresentable: 'any', io: 'input' }) as JsonSchema;
  if (rest.$defs) throw new Error(`${where}: inputs are described inline; a named (answer) schema is used in one`);
  return rest;
}

/** Ids of the schemas `value` refers to, transitively through `schemas`. */
function referencedSchemas(value: unknown, schemas: Record<string, JsonSchema>, into = new Set<string>()): Set<string> {
  if (Array.isArray(value)) {
    for (const item of value) referencedSchemas(item, schemas, into);
  } else if (value && typeof value === 'object') {
    for (const [key, item] of Object.entries(value)) {
      if (key === '$ref' && typeof item === 'string' && item.startsWith(SCHEMA_PREFIX)) {
        const id = item.slice(SCHEMA_PREFIX.length);
        if (!into.has(id)) {
          into.add(id);
          referencedSchemas(schemas[id], schemas, into);
        }
      } else {
        referencedSchemas(item, schemas, into);
      }
    }
  }
  return into;
}

/** Formats outside STANDARD_FORMATS, with where they are. */
function customFormats(value: unknown, path: string, out: string[] = []): string[] {
  if (Array.isArray(value)) {
    for (const [i, item] of value.entries()) customFormats(item, `${path}/${i}`, out);
  } else if (value && typeof value === 'object') {
    for (const [key, item] of Object.entries(value)) {
      if (key === 'format' && typeof item === 'string' && !STANDARD_FORMATS.has(item)) out.push(`${path}: ${item}`);
      else customFormats(item, `${path}/${key}`, out);
    }
  }
  return out;
}

function accessSentence(operation: AnyOperation): string {
  if (operation.ownerOnly) return "Only an owner's session may call it.";
  if (operation.roles) return `Only the session of a person who is ${operation.roles.join(' or ')} of the organisation may call it; API keys and connectors cannot.`;
  if (operation.personOnly) return `Only a person (a session or a connector, never an API key) may call it${operation.scope ? `, holding ${operation.scope}` : ''}.`;
  return operation.scope ? `Needs the ${operation.scope} scope.` : 'Any credential of the account may call it.';
}

function parametersOf(operation: AnyOperation): unknown[] {
  const parameters: unknown[] = [];
  for (const [location, schema] of [
    ['path', operation.params],
    ['query', operation.query],
  ] as const) {
    if (!schema) continue;
    for (const [name, field] of Object.entries(schema.shape as Record<string, z.ZodType>)) {
      const fieldSchema = inputSchema(field, `${operation.name} ${location} ${name}`);
      parameters.push({
        name,
        in: location,
        required: location === 'path' || !field.safeParse(undefined).success,
        ...(typeof fieldSchema.description === 'string' ? { description: fieldSchema.description } : {}),
        schema: fieldSchema,
      });
    }
  }
  return parameters;
}

/**
 * A JSON body, and for an operation that takes files (core/operations/operations.ts `files`) the same
 * fields as a multipart form with the files beside them.
 */
function requestBodyOf(operation: AnyOperation, body: z.ZodType): Record<string, unknown> {
  const json = inputSchema(body, `${operation.name} body`);
  const content: Record<string, unknown> = { 'application/json': { schema: json } };
  const files = operation.files;
  if (files) {
    const properties = (json.properties ?? {}) as Record<string, unknown>;
    const file = { type: 'string', contentMediaType: 'application/octet-stream' };
    content['multipart/form-data'] = {
      schema: {
        ...json,
        properties: { ...properties, [files.field]: { type: 'array', maxItems: files.maxFiles, items: file, description: files.description } },
      },
    };
  }
  return { required: operation.bodyRequired ?? true, content };
}

function successDescription(operation: AnyOperation, schema: JsonSchema | undefined): string {
  const described = typeof schema?.description === 'string' ? schema.description : operation.summary;
  return operation.download ? `${described}; with Accept: application/octet-stream, the file itself, as a download` : described;
}

/** Builds the OpenAPI 3.1 document of one management surface from the operation registry. */
export function buildOpenApiDocument(operations: readonly AnyOperation[], options: OpenApiOptions) {
  const schemas = namedSchemas();
  const paths: Record<string, Record<string, unknown>> = {};
  const tags = new Map<string, { name: string; description: string }>();
  // Every code's statuses across the document, to name its examples (exampleName).
  const statusesOfCode = new Map<string, Set<number>>();
  for (const operation of operations)
    for (const error of operationErrors(operation)) (statusesOfCode.get(error.code) ?? statusesOfCode.set(error.code, new Set()).get(error.code)!).add(error.status);
  const examples: Record<string, unknown> = {};
  const exampleOf = (error: OperationError) => {
    const name = exampleName(error, statusesOfCode);
    examples[name] ??= { summary: `${error.status} ${error.code}`, value: { error: { message: error.message, type: error.type, code: error.code, param: null } } };
    return name;
  };

  for (const operation of operations) {
    const owner = options.ownerOf?.(operation.name);
    const tag = owner?.name ?? operation.name.split('.')[0] ?? operation.name;
    if (!tags.has(tag)) tags.set(tag, { name: tag, description: owner?.description ?? `Operations named ${tag}.*` });

    const output = outputName(operation);
    const errors = errorResponsesFor(operation, exampleOf);
    const parameters = parametersOf(operation);
    const path = operation.path.replace(/:([A-Za-z0-9_]+)/g, '{$1}');
    (paths[path] ??= {})[operation.method.toLowerCase()] = {
      operationId: operation.name,
      summary: operation.summary,
      description: operation.description ?? `${operation.summary}. ${accessSentence(operation)}`,
      tags: [tag],
      // The scope goes in x-required-scope: OpenAPI 3.1 would allow it in this list for a bearer
      // scheme, but linters (Spectral's oas3-operation-security-defined) accept scopes only of OAuth.
      security: [{ bearerAuth: [] }],
      'x-required-scope': operation.scope,
      ...(operation.ownerOnly ? { 'x-owner-only': true } : {}),
      ...(operation.personOnly ? { 'x-person-only': true } : {}),
      // Reserved to people's own sessions holding one of these organisation roles (keys never).
      ...(operation.roles ? { 'x-session-roles': [...operation.roles] } : {}),
      // The same operation at POST /mcp (core/operations/README.md): its tool name and what it declares of writing.
      ...(operation.mcp === false ? {} : { 'x-mcp-tool': toolNameOf(operation.name) }),
      ...(operation.wide ? { 'x-svc-wide': true } : {}),
      'x-read-only': operation.readOnly,
      ...(parameters.length ? { parameters } : {}),
      ...(operation.body ? { requestBody: requestBodyOf(operation, operation.body) } : {}),
      responses: {
        [String(operation.status ?? 200)]: {
          description: successDescription(operation, schemas[output]),
          content: {
            'application/json': { schema: { $ref: schemaRef(output) } },
            ...(operation.download ? { 'application/octet-stream': { schema: { type: 'string', contentMediaType: 'application/octet-stream' } } } : {}),
          },
        },
        ...errors,
      },
    };
  }

  // Only what this document uses: the registry also holds the views of plugins that are off.
  const used = referencedSchemas(paths, schemas);
  if (schemas.Error) throw new Error('Error is the error envelope; name the schema otherwise');
  const componentSchemas: Record<string, JsonSchema> = { Error: errorSchema };
  for (const id of [...used].sort()) {
    if (id === 'Error') continue;
    const schema = schemas[id];
    if (!schema) throw new Error(`A reference to #/components/schemas/${id}, which no schema is named`);
    componentSchemas[id] = schema;
  }
  const formats = customFormats({ paths, componentSchemas }, '#');
  if (formats.length) throw new Error(`Non-standard formats in the OpenAPI document: ${formats.join(', ')}`);

  const publicUrl = options.publicUrl?.replace(/\/+$/, '');
  return {
    openapi: '3.1.0',
    info: {
      title: 'svc management API',
      version: '1.0.0',
      description:
        "Management operations. The same routes are served under /client, under /platform/v1 on regional hosts, and as MCP tools at POST /mcp (stateless Streamable HTTP; Bearer API key with mcp:read, and mcp:write for the tools that write, or a person's session token): each operation's tool name is its x-mcp-tool, its input is its path, query and body fields in one object.",
      license: { name: 'Apache-2.0', identifier: 'Apache-2.0' },
    },
    servers: [{ url: options.prefix, description: 'This host' }, ...(publicUrl ? [{ url: `${publicUrl}${options.prefix}`, description: 'The public address of the service' }] : [])],
    security: [{ bearerAuth: [] }],
    tags: [...tags.values()].sort((a, b) => a.name.localeCompare(b.name)),
    paths,
    components: {
      securitySchemes: {
        bearerAuth: { type: 'http', scheme: 'bearer', description: `API key (svc_live_…) or session token. Scopes: ${SCOPES.join(', ')}` },
      },
      schemas: componentSchemas,
      examples: Object.fromEntries(Object.entries(examples).sort(([a], [b]) => a.localeCompare(b))),
    },
  };
}
