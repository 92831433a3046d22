import { createHash } from 'node:crypto';
import type { LightMyRequestResponse } from 'fastify';
import type { Test } from 'tap';
import { z } from 'zod';
import { SCOPES } from '../../core/identity/scopes.ts';
import { Tokens } from '../../core/kernel/di-tokens.ts';
import { messagesRequestSchema } from '../../plugins/inference/anthropic-messages/messages-request-schema.ts';
import { chatRequestSchema } from '../../plugins/inference/chat-request-schema.ts';
import { speechRequestSchema } from '../../plugins/inference/speech-capability.ts';
import { embeddingsRequestSchema } from '../../plugins/inference/embeddings-capability.ts';
import { evaluateRequestSchema } from '../../plugins/inference/evaluate-request.ts';
import { batchCreateRequest, batchListQuery } from '../../plugins/batches/batch-routes.ts';
import { responsesRequestSchema } from '../../plugins/inference/responses-request.ts';
import { imageRequestSchema } from '../../plugins/inference/images-capability.ts';
import { MeteringTokens } from '../../plugins/metering/index.ts';
import { fileListQuery } from '../../plugins/files/file-routes.ts';
import {
  bodyVariants,
  pathCases,
  queryCases,
  queryValueAccepted,
  sampleOf,
  schemaOracle,
  seededRandom,
  seededUuid,
  validSampleOf,
  wholeBodyVariants,
  type Random,
  type Schema,
  type Variant,
} from '../fixtures/input-fuzz.ts';
import { BODY_OVERRIDES } from '../fixtures/operation-inputs.ts';
import { allPlugins, buildTestApp, createKey, type TapLike } from './app.ts';
import { listeningBase, mcpClient } from './mcp-client.ts';
import { connectorMcpClient, connectorToken, onAuthHost } from './oauth.ts';
import { fastDeriveKey } from './people.ts';
import { invalidNamesFailAtOnce } from './invalid-names.ts';

/*
 * Input fuzzing of every route a caller can reach: every operation of the OpenAPI document, every
 * endpoint GET /v1 lists and every tool at /mcp, with malformed variants generated from their declared
 * schemas (test/fixtures/input-fuzz.ts), sent with an owner's session and with a key holding every
 * scope. Whatever the input: never a 5xx, every error in the envelope, and no success for input the
 * declared schema (or a rule it cannot express) calls invalid. New operations are covered as soon
 * as they are in the document; a new /v1 endpoint with a body needs its schema in V1_BODY_SCHEMAS.
 *
 * The work is split over several files (test/core/input-fuzz-*.test.ts) that tap runs in parallel, each
 * with its own app built here: the management operations and the tools in shards (SHARDS), /v1 in one.
 * test/core/input-fuzz-shards.test.ts checks that the shards together cover everything exactly once.
 */

const SEED = 20_261_121;

/** A stable 32-bit number of a name (the first bytes of its SHA-256): the same on every run and machine. */
function hash32(name: string): number {
  return createHash('sha256').update(name).digest().readUInt32BE(0);
}

/**
 * The random stream of one endpoint or tool: derived from the seed and its own name, so its cases are
 * the same whichever shard or file it lands in, and whatever ran before it in that file.
 */
export const randomFor = (name: string): Random => seededRandom((SEED ^ hash32(name)) >>> 0);

/** How many files each sharded part is split into: raise a count (and add its files) when a shard nears the timeout. */
export const SHARDS = { management: 3, mcp: 6 } as const;
export type ShardedPart = keyof typeof SHARDS;

/** The shard (1-based) an operation or tool belongs to: a stable split by a hash of its name. */
export const shardOf = (part: ShardedPart, name: string): number => (hash32(name) % SHARDS[part]) + 1;

/** A zod request schema as the JSON Schema the fuzzer reads (without the dialect line its validator does not know). */
function jsonSchemaOf(schema: z.ZodType): Schema {
  const { $schema: _dialect, ...json } = z.toJSONSchema(schema, { io: 'input', unrepresentable: 'any' }) as Schema & { $schema?: string };
  return json;
}

/** The request schemas of /v1 endpoints that take a body (no OpenAPI document describes /v1). */
const V1_BODY_SCHEMAS: Readonly<Record<string, Schema>> = {
  'POST /v1/chat/completions': chatRequestSchema as Schema,
  'POST /v1/embeddings': embeddingsRequestSchema as Schema,
  'POST /v1/images/generations': imageRequestSchema as Schema,
  'POST /v1/audio/speech': speechRequestSchema as Schema,
  'POST /v1/messages': messagesRequestSchema as Schema,
  'POST /v1/responses': responsesRequestSchema as Schema,
  'POST /v1/evaluate': evaluateRequestSchema as Schema,
  'POST /v1/batches': jsonSchemaOf(batchCreateRequest),
};
/** /v1 endpoints that take no body (OpenAI's SDK sends none): a body sent must be empty. */
const V1_WITHOUT_BODY = new Set(['POST /v1/batches/{id}/cancel']);

/** Routes that speak another API than OpenAI's answer errors in that API's shape (Anthropic's: `{type: 'error', error: {type, message}}`). */
const FOREIGN_ERROR_SHAPES: Readonly<Record<string, (body: unknown) => boolean>> = {
  '/v1/messages': (body) => {
    const { type, error, ...rest } = (body ?? {}) as { type?: unknown; error?: Record<string, unknown> };
    return (
      type === 'error' &&
      Object.keys(rest).length === 0 &&
      !!error &&
      Object.keys(error).sort().join() === 'message,type' &&
      typeof error.message === 'string' &&
      typeof error.type === 'string'
    );
  },
};
/** /v1 endpoints whose body is multipart/form-data: the JSON variants here only meet the 415 (uploads are tested in their own files). */
const V1_MULTIPART = new Set(['POST /v1/audio/transcriptions', 'POST /v1/files']);

/** The query parameters of /v1 endpoints that take any, from their schemas (no OpenAPI document describes /v1). */
const V1_QUERY_SCHEMAS: Readonly<Record<string, z.ZodObject<z.ZodRawShape>>> = {
  'GET /v1/files': fileListQuery,
  'GET /v1/batches': batchListQuery,
};

function v1QueryParameters(entry: string): OpenApiParameter[] {
  const shape = V1_QUERY_SCHEMAS[entry]?.shape ?? {};
  return Object.entries(shape).map(([name, field]) => {
    const { $schema: _ignored, ...schema } = z.toJSONSchema(field as z.ZodType, { io: 'input', unrepresentable: 'any' }) as Schema & { $schema?: string };
    return { name, in: 'query' as const, required: !(field as z.ZodType).safeParse(undefined).success, schema };
  });
}

/** Connectors sign in at auth_url, a host name of this same server (plugins/oauth). */
const AUTH_URL = 'http://auth.localhost:8080';

interface OpenApiParameter {
  name: string;
  in: 'path' | 'query';
  required?: boolean;
  schema: Schema;
}

interface OpenApiOperation {
  operationId: string;
  parameters?: OpenApiParameter[];
  requestBody?: { required?: boolean; content: { 'application/json': { schema: Schema } } };
}

export interface Endpoint {
  label: string;
  /** The operationId of a management operation; the `METHOD /path` of a /v1 endpoint. */
  name: string;
  method: string;
  /** With `{name}` placeholders; absolute (`/client/keys/{id}`). */
  path: string;
  pathParams: string[];
  query: OpenApiParameter[];
  body: Schema | null;
  bodyRequired: boolean;
  /** A valid body, when the endpoint takes one. */
  sampleBody: Record<string, unknown> | undefined;
  /** Refuses NUL in every string (management), or passes prompts through (/v1). */
  nulInvalid: boolean;
}

const placeholders = (path: string) => [...path.matchAll(/\{([^}]+)\}/g)].map((m) => m[1] ?? '');
const fill = (path: string, values: Record<string, string>) => path.replace(/\{([^}]+)\}/g, (_m, name: string) => encodeURIComponent(values[name] ?? ''));

const ID_PATTERN = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$|^req_/i;

/**
 * Path parameters naming records that do not exist yet, so any well-formed id is accepted there:
 * the apps whose tool groups are stored ahead of them (plugins/tool-gateway/README.md, "Apps' tools").
 * Remove an entry once its records exist.
 */
const IDS_OF_RECORDS_TO_COME: Readonly<Record<string, string>> = { 'mcp.apps.ai-tools.set': 'id' };
const namesRecordToCome = (operationName: string, param: string) => IDS_OF_RECORDS_TO_COME[operationName] === param;

interface Case {
  what: string;
  url: string;
  payload?: string;
  invalid: boolean;
}

/** Every malformed request for one endpoint, given real path values. */
function casesFor(endpoint: Endpoint, values: Record<string, string>, random: Random): Case[] {
  const urlWith = (pathValues: Record<string, string>, query: string[]) => `${fill(endpoint.path, pathValues)}${query.length ? `?${query.join('&')}` : ''}`;
  const withQuery = (query: string[]) => urlWith(values, query);
  const basePayload = endpoint.sampleBody === undefined ? undefined : JSON.stringify(endpoint.sampleBody);
  const required = endpoint.query.filter((p) => p.required);
  const requiredQuery = required.map((p) => `${encodeURIComponent(p.name)}=${encodeURIComponent(String(sampleOf(p.schema, p.schema, random)))}`);
  const cases: Case[] = [];

  for (const param of endpoint.pathParams) {
    for (const bad of pathCases(random)) {
      const toCome = bad.what === 'a uuid naming nothing' && namesRecordToCome(endpoint.name, param);
      cases.push({ what: `path ${param}: ${bad.what}`, url: urlWith({ ...values, [param]: bad.value }, requiredQuery), payload: basePayload, invalid: !toCome });
    }
  }
  for (const param of endpoint.query) {
    const others = required.filter((p) => p !== param).map((p) => `${encodeURIComponent(p.name)}=${encodeURIComponent(String(sampleOf(p.schema, p.schema, random)))}`);
    for (const c of queryCases(param.name, param.schema, random)) {
      const invalid = c.invalid === true || (c.value !== undefined && !queryValueAccepted(param.schema, c.value));
      cases.push({ what: `query ${c.what}`, url: withQuery([...others, c.query]), payload: basePayload, invalid });
    }
    if (param.required) cases.push({ what: `query ${param.name}: missing`, url: withQuery(others), payload: basePayload, invalid: true });
  }
  cases.push({ what: 'query: an unknown parameter', url: withQuery([...requiredQuery, 'zz_unknown=1']), payload: basePayload, invalid: false });

  const url = withQuery(requiredQuery);
  if (endpoint.body && endpoint.sampleBody) {
    const oracle = schemaOracle(endpoint.body);
    const judge = (variant: Variant): Case => {
      let parsed: unknown;
      let parses = true;
      try {
        parsed = JSON.parse(variant.payload);
      } catch {
        parses = false;
      }
      return { what: `body ${variant.what}`, url, payload: variant.payload, invalid: variant.invalid === true || !parses || !oracle(parsed) };
    };
    for (const variant of wholeBodyVariants(endpoint.sampleBody)) cases.push(judge(variant));
    for (const variant of bodyVariants(endpoint.body, endpoint.sampleBody, { root: endpoint.body, random, nulInvalid: endpoint.nulInvalid })) cases.push(judge(variant));
    if (endpoint.bodyRequired) cases.push({ what: 'body: none', url, invalid: true });
  } else if (endpoint.method !== 'GET' && endpoint.path.startsWith('/client')) {
    cases.push({ what: 'body: one where none is taken', url, payload: '{"surprise":true}', invalid: true });
  }
  // Possibly-valid variants last: they may change or remove the resource the others are about.
  return [...cases.filter((c) => c.invalid), ...cases.filter((c) => !c.invalid)];
}

const ENVELOPE_KEYS = ['code', 'message', 'param', 'type'];

/** What is wrong with the answer to one case, or null. */
function problemWith(response: LightMyRequestResponse, invalid: boolean, path: string): string | null {
  if (response.statusCode >= 500) return 'a 5xx';
  if (response.statusCode < 400) return invalid ? `accepted (${response.statusCode}) though invalid` : null;
  let body: unknown;
  try {
    body = response.json();
  } catch {
    return 'an error that is not JSON';
  }
  const foreign = FOREIGN_ERROR_SHAPES[path];
  if (foreign) return foreign(body) ? null : 'an error outside the route’s own shape';
  const error = (body as { error?: Record<string, unknown> } | null)?.error;
  if (!error || Object.keys(body as object).length !== 1) return 'an error outside the envelope';
  if (Object.keys(error).sort().join() !== ENVELOPE_KEYS.join()) return 'an envelope with other fields';
  const typed = typeof error.message === 'string' && typeof error.type === 'string' && typeof error.code === 'string' && (error.param === null || typeof error.param === 'string');
  return typed ? null : 'an envelope with mistyped fields';
}

/** What is wrong with one tool result, or null. */
function toolProblem(result: unknown, invalid: boolean): string | null {
  const { isError, content } = result as { isError?: boolean; content: Array<{ type: string; text?: string }> };
  if (!isError) return invalid ? 'accepted though invalid' : null;
  const text = content.find((part) => part.type === 'text')?.text;
  let body: { error?: Record<string, unknown> } | null = null;
  try {
    body = JSON.parse(text ?? '') as { error?: Record<string, unknown> };
  } catch {
    return 'an error that is not the envelope';
  }
  const error = body?.error;
  if (!error || Object.keys(error).sort().join() !== ENVELOPE_KEYS.join()) return 'an error outside the envelope';
  if (error.type === 'api_error' || error.code === 'internal_error' || error.code === 'service_unavailable') return 'a server error';
  return null;
}

/** Calls between request-log writes: what a logged call stores must be storable too. */
const FLUSH_EVERY = 100;

/**
 * An app with every plugin, the fuzzing credentials and a few logged calls, and what the fuzzing
 * files run against it. Each file builds its own: the shards share no state, so tap may run them at once.
 */
export async function fuzzingApp(t: TapLike) {
  const test = await buildTestApp(t, {
    deriveKey: fastDeriveKey,
    outboundLookup: invalidNamesFailAtOnce,
    plugins: {
      ...allPlugins(),
      oauth: { authUrl: AUTH_URL },
      inference: {
        providers: { mock: { type: 'mock' } },
        models: { 'mock-small': { routes: [{ provider: 'mock', model: 'mock-small' }], prices: { inputPerMTokUsd: 1, outputPerMTokUsd: 2 } } },
      },
      // Valid-looking variants should reach the provider, not stop at a rate limit; the request log
      // is written when the test flushes it (see fuzz), so a failing write is seen, not retried in the background.
      metering: {
        initialCreditUsd: 1_000,
        limits: { keyDefaults: { requestsPerMinute: 1_000_000, tokensPerMinute: null, concurrency: 1_000 } },
        requestLog: { flushIntervalMs: 3_600_000 },
      },
    },
  });
  const allScopesKey = (await createKey(test, { name: 'fuzz: every scope', scopes: [...SCOPES] })).key;
  // A key made by a key, limited to one model, on the routes its rules govern (keys and /v1): their
  // cases also meet the chain read at authentication, the narrowing checks and its maker's limits.
  const madeByKey = await test.call('POST', '/client/keys', { token: allScopesKey, body: { name: 'fuzz: made by a key', scopes: [...SCOPES], models: ['mock-small'] } });
  const credentials: Array<{ name: string; token: string; covers?: (path: string) => boolean }> = [
    { name: 'owner session', token: test.ownerToken },
    { name: 'all-scopes key', token: allScopesKey },
    { name: 'key made by a key', token: (madeByKey.json() as { key: string }).key, covers: (path) => path.startsWith('/v1') || path.includes('/keys') },
  ];

  // A few logged calls, so request-log routes have rows, ids and cursors to work on.
  for (let i = 0; i < 3; i += 1) {
    await test.call('POST', '/v1/chat/completions', { token: allScopesKey, body: { model: 'mock-small', messages: [{ role: 'user', content: `call ${i}` }] } });
  }
  const writer = test.app.svc.container.resolve(MeteringTokens.Writer);
  await writer.flush();

  const document = (await test.call('GET', '/client/openapi.json', { token: null })).json() as {
    servers: Array<{ url: string }>;
    paths: Record<string, Record<string, OpenApiOperation>>;
  };
  /** The document's paths are relative to its server: the relative one, this host's /client. */
  const surface = document.servers.find((server) => server.url.startsWith('/'))?.url ?? '/client';

  const send = (method: string, url: string, token: string, payload?: string): Promise<LightMyRequestResponse> =>
    test.app.inject({
      method: method as 'POST',
      url,
      headers: { authorization: `Bearer ${token}`, ...(payload !== undefined ? { 'content-type': 'application/json' } : {}) },
      ...(payload !== undefined ? { payload } : {}),
    });

  /** An id of an existing resource for a path parameter: created through the collection's POST, else the first one it lists. */
  async function existingId(collection: string, collectionUrl: string, param: string, random: Random): Promise<string | undefined> {
    const pick = (item: unknown) => {
      if (typeof item !== 'object' || item === null) return undefined;
      const record = item as Record<string, unknown>;
      const value = record[param] ?? record.id ?? Object.values(record).find((v) => typeof v === 'string' && ID_PATTERN.test(v));
      return typeof value === 'string' ? value : undefined;
    };
    const relative = collection.slice(surface.length);
    const create = document.paths[relative]?.post;
    if (create) {
      const schema = create.requestBody?.content['application/json'].schema;
      const body = BODY_OVERRIDES[create.operationId]?.() ?? (schema ? sampleOf(schema, schema, random) : undefined);
      const response = await send('POST', collectionUrl, test.ownerToken, body === undefined ? undefined : JSON.stringify(body));
      if (response.statusCode < 300) return pick(response.json());
    }
    if (document.paths[relative]?.get) {
      const response = await send('GET', collectionUrl, test.ownerToken);
      if (response.statusCode < 300) return pick((response.json() as { data?: unknown[] }).data?.[0]);
    }
    return undefined;
  }

  /** Real values for the path's parameters, so variants of query and body reach handlers and storage. */
  async function realPathValues(path: string, random: Random): Promise<Record<string, string>> {
    const values: Record<string, string> = {};
    const segments = path.split('/');
    for (let i = 0; i < segments.length; i += 1) {
      const name = /^\{(.+)\}$/.exec(segments[i] ?? '')?.[1];
      if (!name) continue;
      const collection = segments.slice(0, i).join('/');
      values[name] = (await existingId(collection, fill(collection, values), name, random)) ?? seededUuid(random);
    }
    return values;
  }

  /** Every operation of the document, as endpoints to fuzz (its sample body drawn from its own random stream). */
  function managementEndpoints(): Endpoint[] {
    const out: Endpoint[] = [];
    for (const [path, methods] of Object.entries(document.paths)) {
      for (const [method, operation] of Object.entries(methods)) {
        const random = randomFor(operation.operationId);
        const schema = operation.requestBody?.content['application/json'].schema ?? null;
        const oracle = schema ? schemaOracle(schema) : null;
        const sample = schema ? (BODY_OVERRIDES[operation.operationId]?.() ?? validSampleOf(schema, schema, random, (v) => oracle!(v))) : undefined;
        out.push({
          label: `${method.toUpperCase()} ${surface}${path} (${operation.operationId})`,
          name: operation.operationId,
          method: method.toUpperCase(),
          path: `${surface}${path}`,
          pathParams: placeholders(path),
          query: (operation.parameters ?? []).filter((p) => p.in === 'query'),
          body: schema,
          bodyRequired: operation.requestBody?.required ?? false,
          sampleBody: sample as Record<string, unknown> | undefined,
          nulInvalid: true,
        });
      }
    }
    return out;
  }

  type Tap = Pick<Test, 'ok' | 'same'>;

  /** Sends every case of one endpoint with every credential that covers it; one assertion lists the problems. */
  async function fuzz(t: Tap, endpoint: Endpoint, values: Record<string, string>, random: Random): Promise<void> {
    const cases = casesFor(endpoint, values, random);
    const problems: string[] = [];
    for (const [index, c] of cases.entries()) {
      for (const credential of credentials) {
        if (credential.covers && !credential.covers(endpoint.path)) continue;
        const response = await send(endpoint.method, c.url, credential.token, c.payload);
        const problem = problemWith(response, c.invalid, endpoint.path);
        if (problem) problems.push(`${credential.name}, ${c.what}: ${problem}: ${response.statusCode} ${response.body.slice(0, 200)}`);
      }
      if (index % FLUSH_EVERY === FLUSH_EVERY - 1 || index === cases.length - 1) {
        const failed = writer.snapshot().failedFlushes;
        await writer.flush();
        if (writer.snapshot().failedFlushes > failed) {
          // A failed write is retried with every later batch: stop here rather than pile up more.
          problems.push(`the request log could not store the calls of cases ${Math.max(0, index - FLUSH_EVERY + 1)}..${index} (up to: ${c.what})`);
          break;
        }
      }
    }
    t.ok(cases.length > 0, `${cases.length} cases`);
    t.same(problems.slice(0, 25), [], `${endpoint.label}: ${problems.length} problem(s)`);
  }

  /** The operations of the document in one shard, each fuzzed in a subtest of `t`. */
  async function fuzzManagement(t: Test, shard: number): Promise<void> {
    const endpoints = managementEndpoints();
    t.ok(endpoints.length >= 30, `${endpoints.length} operations in the document`);
    const mine = endpoints.filter((endpoint) => shardOf('management', endpoint.name) === shard);
    t.ok(mine.length > 0, `${mine.length} of them in shard ${shard} of ${SHARDS.management}`);
    for (const endpoint of mine) {
      const random = randomFor(endpoint.name);
      await t.test(endpoint.label, async (t) => fuzz(t, endpoint, await realPathValues(endpoint.path, random), random));
    }
  }

  /** Every endpoint GET /v1 lists, with request bodies logged. */
  async function fuzzV1(t: Test): Promise<void> {
    // Bodies are stored only while logging is on: odd prompts must reach storage too.
    t.equal((await test.call('POST', '/client/log-requests', { body: { enabled: true } })).statusCode, 200, 'request logging is on');
    const listed = (await test.call('GET', '/v1', { token: allScopesKey })).json() as { endpoints: string[] };
    const served = (await test.call('GET', '/v1/models', { token: allScopesKey })).json() as { data: Array<{ id: string }> };
    const model = served.data[0]?.id ?? 'mock-small';
    t.ok(listed.endpoints.length >= 3, listed.endpoints.join(', '));
    for (const entry of listed.endpoints) {
      const random = randomFor(entry);
      const [method = 'GET', path = '/'] = entry.split(' ');
      const schema = V1_BODY_SCHEMAS[entry] ?? null;
      if (method !== 'GET' && method !== 'DELETE' && !V1_MULTIPART.has(entry) && !V1_WITHOUT_BODY.has(entry)) t.ok(schema, `${entry} has its request schema in V1_BODY_SCHEMAS`);
      let sample: Record<string, unknown> | undefined;
      if (schema) {
        const oracle = schemaOracle(schema);
        sample = { ...(validSampleOf(schema, schema, random, (v) => oracle(v)) as Record<string, unknown>), ...(schema.properties?.model ? { model } : {}) };
      }
      const endpoint: Endpoint = {
        label: entry,
        name: entry,
        method,
        path,
        pathParams: placeholders(path),
        query: v1QueryParameters(entry),
        body: schema,
        bodyRequired: schema !== null,
        sampleBody: sample,
        nulInvalid: false,
      };
      const values = Object.fromEntries(endpoint.pathParams.map((name) => [name, name === 'model' ? model : seededUuid(random)]));
      await t.test(entry, async (t) => fuzz(t, endpoint, values, random));
    }
    await writer.flush();
    t.same(writer.snapshot(), { ...writer.snapshot(), queued: 0, failedFlushes: 0, dropped: 0 }, 'every logged call and body was stored');
  }

  /** The MCP clients of the three credentials, with the tools each lists. */
  async function mcpClients(t: Test) {
    const base = await listeningBase(test);
    const auth = onAuthHost(test, AUTH_URL);
    const connected = [
      { name: 'owner session', client: await mcpClient(t, base, test.ownerToken) },
      { name: 'all-scopes key', client: await mcpClient(t, base, allScopesKey) },
      { name: 'connector', client: await connectorMcpClient(t, auth, await connectorToken(auth)) },
    ];
    // The SDK client compiles a validator for every tool it lists: list once per client, and keep the tools.
    return Promise.all(
      connected.map(async (c) => {
        const { tools } = await c.client.listTools();
        return { ...c, tools, lists: new Set(tools.map((tool) => tool.name)) };
      }),
    );
  }

  /**
   * The same fuzzing at /mcp: the tools of one shard, as the owner's session, as a key holding every scope and, at
   * `{auth_url}/mcp`, as a connector granted every scope, with variants of the tool's own input schema
   * (path, query and body fields merged) through the official SDK client. Whatever the arguments: a
   * result, never a transport error; every failure an `isError` result carrying the envelope, never a
   * 5xx; no success for arguments the announced schema refuses. A credential is sent only the tools it
   * lists (a connector is never offered owner-only ones; the scope matrix covers refusals).
   */
  async function fuzzMcp(t: Test, shard: number): Promise<void> {
    const operations = test.app.svc.container.resolve(Tokens.Operations);
    // As when the tools followed /v1 in one file: request logging on, so bodies the tools log are stored too.
    t.equal((await test.call('POST', '/client/log-requests', { body: { enabled: true } })).statusCode, 200, 'request logging is on');
    const clients = await mcpClients(t);
    t.ok(clients[2]!.lists.size >= 25, `the connector lists ${clients[2]!.lists.size} tools`);
    const tools = clients[0]!.tools;
    t.ok(tools.length >= 30, `${tools.length} tools`);
    const mine = tools.filter((tool) => shardOf('mcp', tool.name) === shard);
    t.ok(mine.length > 0, `${mine.length} of them in shard ${shard} of ${SHARDS.mcp}`);
    for (const tool of mine) {
      await t.test(tool.name, async (t) => {
        const random = randomFor(tool.name);
        const operation = operations.list().find((op) => op.name.replaceAll('.', '_') === tool.name)!;
        const schema = tool.inputSchema as Schema;
        const oracle = schemaOracle(schema);
        const pathValues = await realPathValues(surface + operation.path.replace(/:(\w+)/g, '{$1}'), random);
        const sample = validSampleOf(schema, schema, random, (v) => oracle(v)) as Record<string, unknown>;
        const baseline = { ...sample, ...(BODY_OVERRIDES[operation.name]?.() ?? {}), ...pathValues };
        const variants = [...wholeBodyVariants(baseline), ...bodyVariants(schema, baseline, { root: schema, random, nulInvalid: true })];
        const ordered = [...variants.filter((v) => v.invalid), ...variants.filter((v) => !v.invalid)];
        const problems: string[] = [];
        let sent = 0;
        for (const variant of ordered) {
          let args: unknown;
          try {
            args = JSON.parse(variant.payload);
          } catch {
            continue;
          }
          // Arguments that are not an object are the protocol's to refuse, before any tool runs.
          if (typeof args !== 'object' || args === null || Array.isArray(args)) continue;
          // What the client sends is JSON: a number too large to be finite travels as null.
          args = JSON.parse(JSON.stringify(args));
          // A filter in the query naming nothing finds nothing (and a record to come is any id); only a body's reference to nothing is invalid.
          const field = /^(\w+): a uuid naming nothing$/.exec(variant.what)?.[1];
          const filter = field !== undefined && (Object.keys(operation.query?.shape ?? {}).includes(field) || namesRecordToCome(operation.name, field));
          const invalid = (variant.invalid === true && !filter) || !oracle(args);
          for (const { name, client, lists } of clients) {
            if (!lists.has(tool.name)) continue;
            sent += 1;
            let result: unknown;
            try {
              result = await client.callTool({ name: tool.name, arguments: args as Record<string, unknown> });
            } catch (error) {
              // The kernel's JSON body limits (nesting depth, __proto__ keys) hold for the whole JSON-RPC
              // message: an invalid one may be refused as a request, 400 in the envelope, before any tool runs.
              const refusedRequest = /Error POSTing to endpoint: \{"error":\{"message":.*"type":"invalid_request_error"/.test((error as Error).message);
              if (!(invalid && refusedRequest)) problems.push(`${name}, ${variant.what}: a protocol error: ${(error as Error).message.slice(0, 200)}`);
              continue;
            }
            const problem = toolProblem(result, invalid);
            if (problem) problems.push(`${name}, ${variant.what}: ${problem}: ${JSON.stringify(result).slice(0, 200)}`);
          }
        }
        await writer.flush();
        t.ok(sent > 0, `${sent} calls`);
        t.same(problems.slice(0, 25), [], `${tool.name}: ${problems.length} problem(s)`);
      });
    }
  }

  return { test, managementEndpoints, mcpClients, fuzzManagement, fuzzV1, fuzzMcp };
}
