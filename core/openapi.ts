import { z } from 'zod';
import type { AnyOperation } from './operations.ts';
import { SCOPES } from './scopes.ts';

type JsonSchema = Record<string, unknown>;

const toSchema = (schema: z.ZodType, io: 'input' | 'output'): JsonSchema => {
  const { $schema: _ignored, ...rest } = z.toJSONSchema(schema, { target: 'draft-2020-12', unrepresentable: 'any', io }) as JsonSchema;
  return rest;
};

const errorSchema: JsonSchema = {
  type: 'object',
  required: ['error'],
  properties: {
    error: {
      type: 'object',
      required: ['message', 'type', 'code', 'param'],
      properties: {
        message: { type: 'string' },
        type: { type: 'string' },
        code: { type: 'string' },
        param: { type: ['string', 'null'] },
      },
    },
  },
};

const ERROR_STATUSES: Record<string, string> = {
  '400': 'Malformed input; the message and param name the field',
  '401': 'Missing or invalid credential',
  '403': 'The credential lacks the scope or role this needs',
  '404': 'No such resource',
  '409': 'Conflicts with the resource state',
};

/** Builds the OpenAPI 3.1 document from the operation registry (the /client mount). */
/** `prefix`: the management surface the document describes (`/client`, or the regional `/platform/v1`): the same operations under either. */
export function buildOpenApiDocument(operations: readonly AnyOperation[], options: { serverUrl?: string; prefix?: string } = {}) {
  const prefix = options.prefix ?? '/client';
  const paths: Record<string, Record<string, unknown>> = {};
  for (const operation of operations) {
    const path = prefix + operation.path.replace(/:([A-Za-z0-9_]+)/g, '{$1}');
    const parameters: unknown[] = [];
    for (const [location, schema] of [
      ['path', operation.params],
      ['query', operation.query],
    ] as const) {
      if (!schema) continue;
      for (const [name, field] of Object.entries(schema.shape as Record<string, z.ZodType>)) {
        const fieldSchema = toSchema(field, 'input');
        parameters.push({
          name,
          in: location,
          required: location === 'path' || !field.safeParse(undefined).success,
          ...(typeof fieldSchema.description === 'string' ? { description: fieldSchema.description } : {}),
          schema: fieldSchema,
        });
      }
    }
    const status = String(operation.status ?? 200);
    const responses: Record<string, unknown> = {
      [status]: { description: operation.summary, content: { 'application/json': { schema: toSchema(operation.output, 'output') } } },
    };
    for (const [code, description] of Object.entries(ERROR_STATUSES)) {
      responses[code] = { description, content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } } };
    }
    (paths[path] ??= {})[operation.method.toLowerCase()] = {
      operationId: operation.name,
      summary: operation.summary,
      ...(operation.description ? { description: operation.description } : {}),
      tags: [operation.name.split('.')[0]],
      'x-required-scope': operation.scope,
      ...(operation.ownerOnly ? { 'x-owner-only': true } : {}),
      ...(parameters.length ? { parameters } : {}),
      ...(operation.body ? { requestBody: { required: operation.bodyRequired ?? true, content: { 'application/json': { schema: toSchema(operation.body, 'input') } } } } : {}),
      responses,
    };
  }
  return {
    openapi: '3.1.0',
    info: {
      title: 'svc management API',
      version: '1.0.0',
      description: 'Management operations. The same routes are served under /platform/v1 on regional hosts, and as MCP tools at /mcp.',
    },
    ...(options.serverUrl ? { servers: [{ url: options.serverUrl }] } : {}),
    security: [{ bearerAuth: [] }],
    components: {
      securitySchemes: {
        bearerAuth: { type: 'http', scheme: 'bearer', description: `API key (svc_live_…) or session token. Scopes: ${SCOPES.join(', ')}` },
      },
      schemas: { Error: errorSchema },
    },
    paths,
  };
}
