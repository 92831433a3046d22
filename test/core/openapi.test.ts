import { gunzipSync } from 'node:zlib';
import { Validator } from '@seriousme/openapi-schema-validator';
import t from 'tap';
import { z } from 'zod';
import { buildOpenApiDocument } from '../../core/kernel/openapi.ts';
import { operationErrors } from '../../core/operations/operation-errors.ts';
import { defineOperation } from '../../core/operations/operations.ts';
import type { AnyOperation } from '../../core/operations/operations.ts';
import { SCOPES } from '../../core/identity/scopes.ts';
import { Tokens } from '../../core/kernel/di-tokens.ts';
import { isStrictObject, pathParamNames, type JsonSchema } from '../fixtures/operation-inputs.ts';
import { buildTestApp } from '../helpers/app.ts';

interface DocOperation {
  operationId?: string;
  summary?: string;
  description?: string;
  tags?: string[];
  security?: Array<Record<string, string[]>>;
  'x-required-scope'?: string | null;
  'x-mcp-tool'?: string;
  'x-read-only'?: boolean;
  parameters?: Array<{ name: string; in: string; required?: boolean; schema?: JsonSchema }>;
  requestBody?: { required?: boolean; content?: Record<string, { schema?: JsonSchema }> };
  responses?: Record<string, { $ref?: string; description?: string; content?: Record<string, { schema?: JsonSchema & { $ref?: string }; examples?: Record<string, { $ref?: string }> }> }>;
}

interface OpenApiDocument {
  openapi: string;
  info: { version: string; title: string; license?: { name: string; identifier?: string } };
  servers: Array<{ url: string; description?: string }>;
  tags: Array<{ name: string; description?: string }>;
  paths: Record<string, Record<string, DocOperation>>;
  components: {
    schemas: Record<string, JsonSchema & { properties?: Record<string, JsonSchema> }>;
    examples: Record<string, { summary?: string; value: { error: { message: string; type: string; code: string; param: string | null } } }>;
  };
}

const HTTP_METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'];

const test = await buildTestApp(t);
const operations: AnyOperation[] = test.app.svc.container.resolve(Tokens.Operations).list();
const response = await test.call('GET', '/client/openapi.json', { token: null });
const doc = response.json() as OpenApiDocument;

/** Paths are relative to the surface's server (`/client`). */
const docPath = (operation: AnyOperation) => operation.path.replace(/:([A-Za-z0-9_]+)/g, '{$1}');
const documented = (operation: AnyOperation): DocOperation | undefined => doc.paths[docPath(operation)]?.[operation.method.toLowerCase()];

t.test('GET /platform/v1/openapi.json describes the same operations under the regional surface', async (t) => {
  const regional = await test.call('GET', '/platform/v1/openapi.json', { token: null });
  t.equal(regional.statusCode, 200);
  const regionalDoc = regional.json() as OpenApiDocument;
  t.same(Object.keys(regionalDoc.paths).sort(), Object.keys(doc.paths).sort(), 'the same paths, relative to the server');
  t.same(regionalDoc.servers, [{ url: '/platform/v1', description: 'This host' }]);
  t.same(regionalDoc.components, doc.components, 'the same components');
});

t.test('paths are relative to the server of the surface, /client', async (t) => {
  t.same(doc.servers, [{ url: '/client', description: 'This host' }], 'no absolute server without server.publicUrl');
  t.ok(Object.keys(doc.paths).length > 0 && Object.keys(doc.paths).every((path) => path.startsWith('/') && !path.startsWith('/client')));
});

t.test('GET /client/openapi.json is served as JSON without a credential', async (t) => {
  t.equal(response.statusCode, 200);
  t.match(String(response.headers['content-type']), /^application\/json/);
});

t.test('the document validates as OpenAPI 3.1', async (t) => {
  const validator = new Validator();
  const result = await validator.validate(structuredClone(doc) as unknown as Record<string, unknown>);
  t.equal(result.valid, true, `valid: ${JSON.stringify(result.errors ?? null).slice(0, 2000)}`);
  t.equal(validator.version, '3.1', 'validated against the 3.1 schema');
  t.match(doc.openapi, /^3\.1\.\d+$/);
});

t.test('info.version is 1.0.0 and the licence is Apache-2.0', async (t) => {
  t.equal(doc.info.version, '1.0.0');
  t.same(doc.info.license, { name: 'Apache-2.0', identifier: 'Apache-2.0' });
});

t.test('every operation is tagged with the plugin that declared it, and every tag is described', async (t) => {
  const tagNames = doc.tags.map((tag) => tag.name);
  t.same(new Set(tagNames).size, tagNames.length, 'tags are listed once');
  for (const tag of doc.tags) t.ok(tag.description, `${tag.name} has a description`);
  const tagOf = (name: string) => documented(operations.find((op) => op.name === name)!)?.tags;
  t.same(tagOf('keys.list'), ['keys']);
  t.same(tagOf('credits.get'), ['metering']);
  t.same(tagOf('requests.list'), ['usage']);
  t.same(tagOf('account.whoami'), ['account']);
  for (const operation of operations) {
    const tags = documented(operation)?.tags ?? [];
    t.ok(tags.length === 1 && tagNames.includes(tags[0] ?? ''), `${operation.name}: one listed tag`);
  }
});

t.test('every operation has a summary, a description and bearer security', async (t) => {
  for (const operation of operations) {
    const entry = documented(operation);
    t.equal(entry?.summary, operation.summary, `${operation.name}: summary`);
    t.ok(entry?.description, `${operation.name}: description`);
    t.same(entry?.security, [{ bearerAuth: [] }], `${operation.name}: security`);
  }
});

t.test('the registry is not empty', async (t) => {
  t.ok(operations.length > 0);
});

t.test('every registered operation appears with its method, path, operationId and x-required-scope', async (t) => {
  for (const operation of operations) {
    const entry = documented(operation);
    t.ok(entry, `${operation.method} ${docPath(operation)} is documented (${operation.name})`);
    if (!entry) continue;
    t.equal(entry.operationId, operation.name, `${operation.name}: operationId`);
    t.ok(Object.hasOwn(entry, 'x-required-scope'), `${operation.name}: has x-required-scope`);
    t.equal(entry['x-required-scope'], operation.scope, `${operation.name}: x-required-scope is ${String(operation.scope)}`);
  }
});

t.test('every operation names its MCP tool and whether it writes', async (t) => {
  for (const operation of operations) {
    const entry = documented(operation);
    t.equal(entry?.['x-mcp-tool'], operation.name.replaceAll('.', '_'), `${operation.name}: x-mcp-tool`);
    t.equal(entry?.['x-read-only'], operation.readOnly, `${operation.name}: x-read-only`);
  }
});

t.test('person-only operations are marked x-person-only', async (t) => {
  const personOnly = operations.filter((operation) => operation.personOnly);
  t.ok(personOnly.length > 0, 'the support operations');
  for (const operation of operations) {
    const entry = documented(operation) as (DocOperation & { 'x-person-only'?: boolean }) | undefined;
    t.equal(entry?.['x-person-only'], operation.personOnly ? true : undefined, operation.name);
  }
});

t.test('every x-required-scope is a scope the spec lists, or null', async (t) => {
  for (const [path, item] of Object.entries(doc.paths)) {
    for (const [method, entry] of Object.entries(item)) {
      if (!HTTP_METHODS.includes(method)) continue;
      const scope = entry['x-required-scope'];
      t.ok(scope === null || (SCOPES as readonly unknown[]).includes(scope), `${method.toUpperCase()} ${path}: ${String(scope)}`);
    }
  }
});

t.test('the document lists no operation that is not registered', async (t) => {
  const ids: string[] = [];
  for (const item of Object.values(doc.paths)) {
    for (const [method, entry] of Object.entries(item)) if (HTTP_METHODS.includes(method)) ids.push(entry.operationId ?? '');
  }
  t.same(ids.sort(), operations.map((op) => op.name).sort());
});

t.test('every path template variable is a required path parameter', async (t) => {
  for (const operation of operations) {
    const entry = documented(operation);
    if (!entry) continue;
    const declared = (entry.parameters ?? []).filter((p) => p.in === 'path');
    t.same(declared.map((p) => p.name).sort(), pathParamNames(operation).sort(), `${operation.name}: path parameters`);
    for (const parameter of declared) t.equal(parameter.required, true, `${operation.name}: ${parameter.name} is required`);
  }
});

t.test('query parameters are documented with their schemas', async (t) => {
  for (const operation of operations) {
    const entry = documented(operation);
    if (!entry || !operation.query) continue;
    const declared = new Map((entry.parameters ?? []).filter((p) => p.in === 'query').map((p) => [p.name, p]));
    for (const [name, field] of Object.entries(operation.query.shape as Record<string, z.ZodType>)) {
      const parameter = declared.get(name);
      t.ok(parameter?.schema, `${operation.name}: query ${name} is documented with a schema`);
      t.equal(parameter?.required, !field.safeParse(undefined).success, `${operation.name}: query ${name} required flag`);
    }
  }
});

t.test('operations with a body document it as application/json', async (t) => {
  for (const operation of operations) {
    const entry = documented(operation);
    if (!entry) continue;
    if (!operation.body) {
      t.notOk(entry.requestBody, `${operation.name}: takes no body`);
      continue;
    }
    t.ok(entry.requestBody?.content?.['application/json']?.schema, `${operation.name}: JSON body schema`);
    t.equal(entry.requestBody?.required, operation.bodyRequired ?? true, `${operation.name}: body required flag`);
  }
});

t.test('strict bodies have additionalProperties: false', async (t) => {
  let strict = 0;
  for (const operation of operations) {
    if (!isStrictObject(operation.body)) continue;
    strict += 1;
    const schema = documented(operation)?.requestBody?.content?.['application/json']?.schema;
    t.equal(schema?.additionalProperties, false, `${operation.name}: additionalProperties false`);
  }
  t.ok(strict > 0, `there are strict bodies to check (${strict})`);
});

t.test('nested strict objects in a body also have additionalProperties: false', async (t) => {
  const keysCreate = operations.find((op) => op.name === 'keys.create');
  t.ok(keysCreate, 'keys.create is registered');
  if (!keysCreate) return;
  const schema = documented(keysCreate)?.requestBody?.content?.['application/json']?.schema;
  const spendCap = schema?.properties?.spendCap;
  const object = spendCap?.anyOf?.find((option) => option.type === 'object') ?? spendCap;
  t.equal(object?.additionalProperties, false);
});

t.test('every operation answers with a named schema, described', async (t) => {
  for (const operation of operations) {
    const success = documented(operation)?.responses?.[String(operation.status ?? 200)];
    const ref = success?.content?.['application/json']?.schema?.$ref ?? '';
    t.match(ref, /^#\/components\/schemas\/[A-Z][A-Za-z]+$/, `${operation.name}: ${operation.status ?? 200} is a named schema`);
    t.ok(doc.components.schemas[ref.split('/').pop() ?? ''], `${operation.name}: ${ref} exists`);
    t.ok(success?.description, `${operation.name}: the success answer is described`);
  }
});

t.test('every operation documents each error it can answer, by status, with the codes the catalogue gives it', async (t) => {
  for (const operation of operations) {
    const responses = documented(operation)?.responses ?? {};
    const documentedCodes = Object.entries(responses)
      .filter(([status]) => Number(status) >= 400)
      .flatMap(([status, answer]) => Object.keys(answer.content?.['application/json']?.examples ?? {}).map((code) => `${status} ${code}`))
      .sort();
    const expected = operationErrors(operation)
      .map((error) => `${error.status} ${error.code}`)
      .sort();
    t.same(documentedCodes, expected, `${operation.name}: its errors`);
    for (const [status, answer] of Object.entries(responses).filter(([status]) => Number(status) >= 400)) {
      t.equal(answer.content?.['application/json']?.schema?.$ref, '#/components/schemas/Error', `${operation.name}: ${status} is the error envelope`);
      for (const code of Object.keys(answer.content?.['application/json']?.examples ?? {})) t.match(answer.description, code, `${operation.name}: ${status} names ${code}`);
    }
  }
});

t.test('every operation documents 401 with the credential refusals, and the errors its handler declares', async (t) => {
  for (const operation of operations) {
    const unauthorized = Object.keys(documented(operation)?.responses?.['401']?.content?.['application/json']?.examples ?? {});
    t.ok(unauthorized.includes('invalid_api_key') && unauthorized.includes('session_expired'), `${operation.name}: 401 lists the credential refusals`);
  }
  const create = operations.find((operation) => operation.name === 'projects.create');
  t.ok(create, 'projects.create is registered');
  const conflict = documented(create!)?.responses?.['409'];
  t.ok(conflict?.content?.['application/json']?.examples?.project_name_taken, 'projects.create documents its 409 project_name_taken');
});

t.test('every error example is the envelope of its catalogued code', async (t) => {
  const examples = Object.entries(doc.components.examples);
  t.ok(examples.length > 20, "the catalogue's codes are examples");
  for (const [name, example] of examples) {
    const { code, type, message, param } = example.value.error;
    t.ok(name === code || name.startsWith(`${code}_`), `${name}: named by its code`);
    t.ok(type && message, `${name}: has a type and a message`);
    t.equal(param, null, `${name}: param is null`);
  }
});

t.test('resources are named components, each name in PascalCase', async (t) => {
  for (const name of [
    'Error',
    'Key',
    'KeyList',
    'KeyDetail',
    'CreatedKey',
    'Project',
    'ProjectList',
    'ProjectMember',
    'Organization',
    'OrganizationList',
    'Budget',
    'CreditBalance',
    'LedgerEntry',
    'LedgerEntryList',
    'UsageReport',
    'RequestLog',
    'RequestLogList',
    'AuditEntry',
    'AuditEntryList',
    'SpendCap',
  ]) {
    t.ok(doc.components.schemas[name], `${name} is a component`);
  }
  for (const name of Object.keys(doc.components.schemas)) t.match(name, /^[A-Z][A-Za-z]+$/, `${name} is PascalCase`);
  const list = doc.components.schemas.KeyList;
  t.same(list?.properties?.data?.items, { $ref: '#/components/schemas/Key' }, 'a list refers to its item');
  t.notOk(JSON.stringify(doc).includes('$defs'), 'no inline definitions');
});

t.test('only standard formats', async (t) => {
  const standard = new Set(['date-time', 'date', 'email', 'uri', 'uuid', 'int32', 'int64', 'float', 'double']);
  const formats = new Set([...JSON.stringify(doc).matchAll(/"format":"([^"]*)"/g)].map((m) => m[1] ?? ''));
  t.ok(formats.size > 0);
  for (const format of formats) t.ok(standard.has(format), `format ${format}`);
  const instant = doc.components.schemas.Key?.properties?.createdAt;
  t.equal(instant?.format, 'date-time', 'timestamps in answers are date-time');
});

t.test('the Error schema is the envelope with exactly message, type, code and param', async (t) => {
  const error = doc.components.schemas.Error?.properties?.error;
  t.same(doc.components.schemas.Error?.required, ['error']);
  t.same([...(error?.required ?? [])].sort(), ['code', 'message', 'param', 'type']);
  t.same(Object.keys(error?.properties ?? {}).sort(), ['code', 'message', 'param', 'type']);
});

t.test('a second app in the same process documents the same named schemas', async (t) => {
  // Named schemas are declared once, at module level: another app's operations answer with the same ones.
  const second = await buildTestApp(t);
  const registry = second.app.svc.container.resolve(Tokens.Operations);
  const again = buildOpenApiDocument(operations, { prefix: '/client', ownerOf: (name) => registry.ownerOf(name) });
  t.same(again.components, doc.components);
  t.same(buildOpenApiDocument(registry.list(), { prefix: '/client', ownerOf: (name) => registry.ownerOf(name) }).components, doc.components);
});

t.test('an answer must be named, and a name belongs to one schema', async (t) => {
  const probe = (output: z.ZodType) =>
    defineOperation({ name: 'probe.get', method: 'GET', path: '/probe', summary: 'A probe', scope: null, readOnly: true, output, handler: async () => ({}) });
  t.throws(() => buildOpenApiDocument([probe(z.object({ a: z.string() }))], { prefix: '/client' }), /name its output schema/);
  const first = z.object({ a: z.string() }).meta({ id: 'OpenApiTestProbe' });
  const second = z.object({ b: z.string() }).meta({ id: 'OpenApiTestProbe' });
  try {
    t.throws(() => buildOpenApiDocument([probe(first)], { prefix: '/client' }), /two schemas are named OpenApiTestProbe/);
    t.same(buildOpenApiDocument([probe(second)], { prefix: '/client' }).components.schemas.OpenApiTestProbe?.required, ['b']);
  } finally {
    z.globalRegistry.remove(second);
    z.globalRegistry.remove(first);
  }
});

t.test('the document is answered gzipped where accepted, revalidated by ETag, and the same document either way', async (t) => {
  const plain = await test.app.inject({ method: 'GET', url: '/client/openapi.json' });
  const zipped = await test.app.inject({ method: 'GET', url: '/client/openapi.json', headers: { 'accept-encoding': 'gzip' } });
  t.equal(zipped.headers['content-encoding'], 'gzip');
  t.equal(plain.headers['cache-control'], 'no-cache');
  t.same(JSON.parse(gunzipSync(zipped.rawPayload).toString()), plain.json());
  const current = await test.app.inject({ method: 'GET', url: '/client/openapi.json', headers: { 'if-none-match': plain.headers.etag as string } });
  t.equal(current.statusCode, 304);
});
