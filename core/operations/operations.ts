import { z } from 'zod';
import type { FastifyBaseLogger } from 'fastify';
import type { ErrorCode } from '../kernel/error-catalogue.ts';
import { ApiError } from '../kernel/errors.ts';
import { permittedErrors, UndeclaredErrorCode } from './operation-errors.ts';
import { authorize, authorizeCredential, authorizeResources, type Authorization, type AuthorizationDeps, type ResourceDeclaration } from '../identity/authorization.ts';
import type { Credential } from '../identity/credential.ts';
import type { Transaction } from '../ports/database.ts';
import type { OrgRole, Scope } from '../identity/scopes.ts';
import type { BlobInfo } from '../ports/blobs.ts';
import type { FileAnswer } from '../http/file-answer.ts';

/**
 * A management operation is declared once and served three ways: as a /client (and /platform/v1)
 * route, as an entry in the OpenAPI document, and as an MCP tool. Nothing about it is written twice.
 */
export type HttpMethod = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
type AnyObjectSchema = z.ZodObject<z.ZodRawShape>;

export interface OperationContext {
  readonly credential: Credential;
  readonly requestId: string;
  readonly logger: FastifyBaseLogger;
  /**
   * The client's address when a surface serves the call (HTTP, MCP): what per-address limits count
   * by (core/net/address-bucket.ts). Absent when code runs an operation for itself.
   */
  readonly clientAddress?: string;
  /**
   * A database transaction for the operation's writes. Use it rather than Database.transaction:
   * the kernel records the call (`management.operation`, the audit log's source) inside it, so
   * the change and its record commit together. Inside, use only `tx` (see the PGlite adapter).
   */
  transaction<T>(fn: (tx: Transaction) => Promise<T>): Promise<T>;
  /** The resources the operation declared, resolved and checked before the handler ran. */
  readonly authorization: Authorization;
  /**
   * The origin the caller reached the service at (`server.publicUrl`'s, else the request's own):
   * where links the operation hands out point. Absent when the caller came by no HTTP request.
   */
  readonly origin?: string;
}

export interface OperationInput<P, Q, B> {
  params: P;
  query: Q;
  body: B;
  /** Files sent with a multipart request (see `files`), already stored; absent or empty otherwise. */
  files?: readonly ReceivedFile[];
}

/**
 * Files an operation takes beside its body. Such a route also takes `multipart/form-data`: the
 * body's fields as text fields and the files under `field`; JSON and MCP callers send none. Each file
 * is streamed into the blob store (core/ports/blobs.ts) under `prefix` before the handler runs, its
 * type sniffed from its first bytes; the handler records the blobs it keeps, and the kernel deletes
 * every one of them when the call fails.
 */
export interface FileInput {
  /** The multipart field that carries the files (a field no JSON body has). */
  readonly field: string;
  readonly maxFiles: number;
  readonly maxFileBytes: number;
  /** Where the caller's files are stored, e.g. `support/<organizationId>/`. */
  prefix(credential: Credential): string;
  /** For the OpenAPI document. */
  readonly description: string;
}

/** A file a multipart request carried, stored before the handler ran. */
export interface ReceivedFile {
  /** As sent, reduced to its last path segment and stripped of control characters (at most 255 characters). */
  readonly filename: string;
  /** What the client said the type was; the blob's own type is sniffed from its bytes. */
  readonly declaredContentType: string;
  readonly blob: BlobInfo;
}

export interface OperationDefinition<
  P extends AnyObjectSchema = AnyObjectSchema,
  Q extends AnyObjectSchema = AnyObjectSchema,
  B extends z.ZodType = z.ZodType,
  O extends z.ZodType = z.ZodType,
> {
  /** Dotted name, e.g. `keys.create`; the MCP tool is named with underscores (`keys_create`). */
  readonly name: string;
  readonly method: HttpMethod;
  /** Relative to the surface, Fastify syntax: `/keys/:id`. */
  readonly path: string;
  readonly summary: string;
  readonly description?: string;
  /** Scope the credential must hold; null when any authenticated credential of the account may call it. */
  readonly scope: Scope | null;
  readonly params?: P;
  readonly query?: Q;
  /** Strict object schemas reject unknown fields (400 naming them). */
  readonly body?: B;
  /** Whether a missing body is an error (default: true when a body schema is given). */
  readonly bodyRequired?: boolean;
  readonly output: O;
  /** HTTP status on success (default 200). */
  readonly status?: number;
  /**
   * Whether the operation changes nothing. The one source of "does this write": a call that writes is
   * recorded (`management.operation`, the audit log) and, over MCP, needs `mcp:write` and is announced
   * without `readOnlyHint`. Declared on every operation; never inferred from the HTTP method
   * (`guardrails.test` is a POST that writes nothing).
   */
  readonly readOnly: boolean;
  /** A write that removes or irreversibly changes something (MCP `destructiveHint`); default false. */
  readonly destructive?: boolean;
  /** Repeating the call with the same input changes nothing more (MCP `idempotentHint`); default: `readOnly`. */
  readonly idempotent?: boolean;
  /**
   * `false` keeps the operation off /mcp (it stays on HTTP). For answers meant for a person's eyes
   * only; see core/operations/README.md for the rule. Default: offered as a tool.
   */
  readonly mcp?: false;
  /**
   * Served only on a host with the wider route set (`server.routeSet: wide`, the default); a host
   * configured `narrow` declares no such operation at all: no route, no OpenAPI entry, no MCP tool.
   */
  readonly wide?: true;
  /** An owner's act (money, account-wide policy): only an owner's session may call it (`roles: ['owner']`). */
  readonly ownerOnly?: boolean;
  /**
   * A person's act (a support request has a requester to answer and mail): a person's session or
   * connector may call it, an API key never (403 `person_required`).
   */
  readonly personOnly?: true;
  /**
   * What an app does to itself while it runs (its own file storage): the app's own key
   * (`SVC_API_KEY`, a key made with an app) may call it on that app although it holds none of the
   * management scopes. The first declared resource must be the app, named in the input; the key's
   * call on any other app answers that kind's 404 (core/identity/authorization.ts `ownAppOnly`).
   */
  readonly ownAppKey?: true;
  /** Files taken beside the body, as multipart (see FileInput). */
  readonly files?: FileInput;
  /**
   * The answer as a file: a request with `Accept: application/octet-stream` gets these bytes (sent as
   * a download, core/http/file-answer.ts) instead of the JSON answer, which every other caller and
   * MCP get. Called with the checked output, after the handler authorised and found the resource.
   */
  readonly download?: (output: z.output<O>, ctx: { credential: Credential }) => Promise<FileAnswer>;
  /**
   * The answer followed as it grows: a request whose query asks for it (`requested`, e.g.
   * `follow=1`) gets server-sent events instead of JSON: `snapshot` with the checked output, then
   * an event per item `stream` yields until it ends or the client goes away, then `end`
   * (core/http/follow-answer.ts). MCP and every other caller get the JSON answer.
   */
  readonly follow?: {
    requested(query: z.output<Q>): boolean;
    stream(output: z.output<O>, ctx: { credential: Credential; signal: AbortSignal }): AsyncIterable<FollowEvent>;
  };
  /**
   * A person's act: only the session of a person holding one of these organisation roles may call
   * it, never an API key or a connector (managing people takes `['owner', 'admin']`). Absent: the
   * scope alone decides. Not declared together with `ownerOnly`, which is its `['owner']`.
   */
  readonly roles?: readonly OrgRole[];
  /**
   * What the operation acts on, where its id sits in the input, and the access it needs:
   * `{ kind: 'key', access: 'write', in: 'path', field: 'id' }`. `authorize` (core/identity/authorization.ts)
   * resolves it and refuses callers who may not reach it, before the handler runs; the handler
   * finds it in `ctx.authorization`.
   */
  readonly resource?: ResourceDeclaration<z.output<P>, z.output<Q>, z.output<B>> | readonly ResourceDeclaration<z.output<P>, z.output<Q>, z.output<B>>[];
  /**
   * The error codes the handler itself answers with. The kernel adds the ones the rest of the
   * declaration implies (authentication, scope, owner-only, input, declared resources; see
   * core/operations/operation-errors.ts); together they are the operation's documented error answers.
   */
  readonly errors?: readonly ErrorCode[];
  handler(input: OperationInput<z.output<P>, z.output<Q>, z.output<B>>, ctx: OperationContext): Promise<z.input<O>>;
}

/** One server-sent event of a followed answer: its name and its JSON data. */
export interface FollowEvent {
  readonly event: string;
  readonly data: unknown;
}

// Heterogeneous collections of operations; each one is type-checked inside defineOperation.
// biome-ignore lint/suspicious/noExplicitAny: the element type varies per entry
export type AnyOperation = OperationDefinition<any, any, any, any>;

export function defineOperation<
  // biome-ignore lint/complexity/noBannedTypes: zod types an object schema without fields as ZodObject<{}>
  P extends AnyObjectSchema = z.ZodObject<{}>,
  // biome-ignore lint/complexity/noBannedTypes: as above
  Q extends AnyObjectSchema = z.ZodObject<{}>,
  B extends z.ZodType = z.ZodUndefined,
  O extends z.ZodType = z.ZodType,
>(definition: OperationDefinition<P, Q, B, O>): OperationDefinition<P, Q, B, O> {
  return definition;
}

export type InputLocation = 'path' | 'query' | 'body';

/** Turns the first zod issue into a 400 that names the field, as the envelope's `param`. */
export function validationError(error: z.ZodError, location: InputLocation): ApiError {
  const issue = error.issues[0];
  if (!issue) return new ApiError('invalid_request', `Invalid ${location}`);
  const base = issue.path.map(String);
  if (issue.code === 'unrecognized_keys') {
    const fields = issue.keys.map((key) => [...base, key].join('.'));
    const noun = fields.length > 1 ? 'fields' : 'field';
    return new ApiError('unknown_field', `Unknown ${noun} in ${location}: ${fields.join(', ')}`, { param: fields[0] ?? null });
  }
  const param = base.join('.') || null;
  const code = location === 'body' && !param ? 'invalid_body' : 'invalid_parameter';
  const message = param ? `Invalid '${param}' in ${location}: ${issue.message}` : `Invalid ${location}: ${issue.message}`;
  return new ApiError(code, message, { param });
}

export function parseInput<S extends z.ZodType>(schema: S | undefined, value: unknown, location: InputLocation): z.output<S> {
  if (!schema) return (value ?? {}) as z.output<S>;
  const result = schema.safeParse(value);
  if (!result.success) throw validationError(result.error, location);
  const nul = findNulCharacter(result.data, []);
  if (nul) {
    // PostgreSQL text and jsonb cannot hold U+0000; refuse it here rather than fail at storage.
    throw new ApiError('invalid_parameter', `Invalid '${nul}' in ${location}: the NUL character (U+0000) is not allowed`, { param: nul });
  }
  return result.data;
}

/** Path of the first string (or key) holding U+0000, or null. */
function findNulCharacter(value: unknown, path: string[]): string | null {
  if (typeof value === 'string') return value.includes('\u0000') ? path.join('.') || '(value)' : null;
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i += 1) {
      const found = findNulCharacter(value[i], [...path, String(i)]);
      if (found) return found;
    }
    return null;
  }
  if (value && typeof value === 'object') {
    for (const [key, item] of Object.entries(value)) {
      if (key.includes('\u0000')) return [...path, key].join('.');
      const found = findNulCharacter(item, [...path, key]);
      if (found) return found;
    }
  }
  return null;
}

/** An operation's input as a surface received it, before validation; files only from a multipart request. */
export interface RawInput {
  params: unknown;
  query: unknown;
  body: unknown;
  files?: readonly ReceivedFile[];
}

export interface RunOptions {
  /** Refuse an ApiError whose code the operation neither declares nor implies (see core/operations/operation-errors.ts). */
  checkDeclaredErrors?: boolean;
}

/**
 * Runs an operation for an authenticated credential: what the credential alone decides (scope,
 * owner-only) first, then the input is validated, then the declared resources are authorised,
 * then the handler runs and its output is checked. With `checkDeclaredErrors`, an ApiError with an
 * undeclared code becomes an UndeclaredErrorCode (a 500): the declaration is wrong, not the caller.
 */
export async function runOperation(
  operation: AnyOperation,
  raw: RawInput,
  ctx: Omit<OperationContext, 'authorization'>,
  deps: AuthorizationDeps,
  options: RunOptions = {},
): Promise<unknown> {
  if (!options.checkDeclaredErrors) return runChecked(operation, raw, ctx, deps);
  try {
    return await runChecked(operation, raw, ctx, deps);
  } catch (error) {
    if (error instanceof ApiError && !permittedErrors(operation).has(error.catalogued)) throw new UndeclaredErrorCode(operation, error.catalogued, error);
    throw error;
  }
}

async function runChecked(operation: AnyOperation, raw: RawInput, ctx: Omit<OperationContext, 'authorization'>, deps: AuthorizationDeps): Promise<unknown> {
  authorizeCredential(ctx.credential, operation);
  const bodyRequired = operation.bodyRequired ?? operation.body !== undefined;
  if (operation.body && bodyRequired && (raw.body === undefined || raw.body === null)) {
    throw new ApiError('missing_body');
  }
  if (!operation.body && raw.body !== undefined && raw.body !== null && !isEmptyObject(raw.body)) {
    throw new ApiError('unexpected_body');
  }
  const input = {
    params: parseInput(operation.params, raw.params ?? {}, 'path'),
    query: parseInput(operation.query, raw.query ?? {}, 'query'),
    // An optional body left out is an empty object; a JSON null sent as the body is still judged (and refused).
    body: operation.body ? parseInput(operation.body, raw.body === undefined && !bodyRequired ? {} : raw.body, 'body') : undefined,
    files: raw.files ?? [],
  };
  const authorization = await authorizeResources(ctx.credential, operation, input, deps);
  const result = await operation.handler(input, { ...ctx, authorization });
  const checked = operation.output.safeParse(result);
  if (!checked.success) {
    // Our own answer broke its documented shape: a bug, surfaced as a masked 500.
    throw new Error(`Operation ${operation.name} produced output outside its schema: ${checked.error.issues[0]?.message ?? ''} at ${checked.error.issues[0]?.path.join('.') ?? ''}`);
  }
  return checked.data;
}

function isEmptyObject(value: unknown): boolean {
  return typeof value === 'object' && value !== null && Object.keys(value).length === 0;
}

/** The plugin that declared an operation, as the OpenAPI document groups it (one tag per plugin). */
export interface OperationOwner {
  readonly name: string;
  readonly description: string;
}

/** Holds every operation the enabled plugins declared, and which plugin declared each. */
export class OperationRegistry {
  private readonly operations = new Map<string, AnyOperation>();
  private readonly owners = new Map<string, OperationOwner>();
  /**
   * Whether run() refuses error codes an operation does not declare. Off in production (a wrong
   * declaration should not cost the caller the real answer); the test helpers turn it on, so a
   * test that provokes an undeclared code fails.
   */
  checkDeclaredErrors = false;

  constructor(private readonly deps: AuthorizationDeps) {}

  /**
   * Whether `credential` may run `operation` on this validated input: scope, owner-only and the
   * declared resources (see core/identity/authorization.ts). Throws the refusal as an ApiError. Every surface
   * that runs operations (HTTP via runOperation, MCP tools) asks this one function.
   */
  authorize(credential: Credential, operation: AnyOperation, input: OperationInput<unknown, unknown, unknown>): Promise<Authorization> {
    return authorize(credential, operation, input, this.deps);
  }

  /** Runs an operation through the same checks as the HTTP surface. */
  run(operation: AnyOperation, raw: RawInput, ctx: Omit<OperationContext, 'authorization'>): Promise<unknown> {
    return runOperation(operation, raw, ctx, this.deps, { checkDeclaredErrors: this.checkDeclaredErrors });
  }

  /** `owner`: the declaring plugin (core/kernel/app.ts passes it); absent for operations a test adds by hand. */
  add(operation: AnyOperation, owner?: OperationOwner): void {
    if (this.operations.has(operation.name)) throw new Error(`Operation ${operation.name} is declared twice`);
    if (operation.ownerOnly && operation.roles) throw new Error(`Operation ${operation.name} declares both ownerOnly and roles; ownerOnly is roles: ['owner']`);
    if (operation.roles?.length === 0) throw new Error(`Operation ${operation.name} declares roles that admit nobody`);
    const tool = toolNameOf(operation.name);
    for (const existing of this.operations.values()) {
      if (toolNameOf(existing.name) === tool) throw new Error(`Operations ${existing.name} and ${operation.name} would both be the MCP tool ${tool}`);
    }
    const collision = inputFieldCollision(operation);
    if (collision) throw new Error(`Operation ${operation.name} takes '${collision}' in two places; an MCP tool takes one object`);
    for (const existing of this.operations.values()) {
      if (existing.method === operation.method && existing.path === operation.path) {
        throw new Error(`Operations ${existing.name} and ${operation.name} share ${operation.method} ${operation.path}`);
      }
    }
    this.operations.set(operation.name, operation);
    if (owner) this.owners.set(operation.name, { name: owner.name, description: owner.description });
  }

  /** The plugin that declared the operation, when it was added with one. */
  ownerOf(name: string): OperationOwner | undefined {
    return this.owners.get(name);
  }

  get(name: string): AnyOperation | undefined {
    return this.operations.get(name);
  }

  list(): AnyOperation[] {
    return [...this.operations.values()];
  }
}

/** What an MCP tool name may be (the MCP specification's tool name rule). */
const TOOL_NAME = /^[A-Za-z0-9_-]{1,64}$/;

/**
 * The MCP tool name of an operation: its name with dots as underscores (`keys.create` -> `keys_create`).
 * Throws for a name that cannot become one; the registry also refuses two names mapping to one tool.
 */
export function toolNameOf(operationName: string): string {
  const tool = operationName.replaceAll('.', '_');
  if (!TOOL_NAME.test(tool)) {
    throw new Error(`Operation name ${operationName} cannot be an MCP tool name: letters, digits, '.', '_' and '-' only, at most 64`);
  }
  return tool;
}

/** The fields of each input location, in the order path, query, body. */
export function inputFieldsOf(operation: AnyOperation): Record<InputLocation, string[]> {
  const keys = (schema: z.ZodType | undefined) => (schema instanceof z.ZodObject ? Object.keys(schema.shape) : []);
  return { path: keys(operation.params), query: keys(operation.query), body: keys(operation.body) };
}

/** A field named in two input locations (it could not be told apart in one merged object), or null. */
function inputFieldCollision(operation: AnyOperation): string | null {
  if (operation.body && !(operation.body instanceof z.ZodObject)) return '(body that is not an object)';
  const seen = new Set<string>();
  for (const fields of Object.values(inputFieldsOf(operation))) {
    for (const field of fields) {
      if (seen.has(field)) return field;
      seen.add(field);
    }
  }
  return null;
}

/** The merged input of an operation, as one strict object: what an MCP tool takes. */
export function combinedInputSchema(operation: AnyOperation): z.ZodObject<z.ZodRawShape> {
  const shape: z.ZodRawShape = {};
  for (const schema of [operation.params, operation.query, operation.body]) {
    if (schema instanceof z.ZodObject) Object.assign(shape, schema.shape);
  }
  return z.strictObject(shape);
}

/**
 * Splits one merged tool input back into path, query and body, so the operation validates each as
 * over HTTP (refinements included). A field no location takes is refused here, naming it.
 */
export function splitCombinedInput(operation: AnyOperation, input: Record<string, unknown>): { params: unknown; query: unknown; body: unknown } {
  const fields = inputFieldsOf(operation);
  const unknown = Object.keys(input).filter((key) => !fields.path.includes(key) && !fields.query.includes(key) && !fields.body.includes(key));
  if (unknown.length > 0) {
    const noun = unknown.length > 1 ? 'fields' : 'field';
    throw new ApiError('unknown_field', `Unknown ${noun} in input: ${unknown.join(', ')}`, { param: unknown[0] ?? null });
  }
  const pick = (keys: string[]) => Object.fromEntries(Object.entries(input).filter(([key]) => keys.includes(key)));
  const properties = (operationJsonSchemas(operation).input['properties'] ?? {}) as Record<string, JsonSchema>;
  const asUrl = (keys: string[], location: InputLocation) => asUrlValues(pick(keys), properties, location);
  return { params: asUrl(fields.path, 'path'), query: asUrl(fields.query, 'query'), body: operation.body ? pick(fields.body) : undefined };
}

/**
 * Path and query fields as a URL carries them, so the operation parses them exactly as over HTTP:
 * a number or boolean becomes its text where the tool's schema announces a number or boolean
 * (`limit: 10`), and is refused where it announces only a string (an id, a filter); an object, array
 * or null cannot sit in a URL and is refused too.
 */
function asUrlValues(values: Record<string, unknown>, properties: Record<string, JsonSchema>, location: InputLocation): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [key, value] of Object.entries(values)) {
    const stringOnly = announcesOnlyStrings(properties[key]);
    if (typeof value === 'string' || (!stringOnly && (typeof value === 'number' || typeof value === 'boolean'))) out[key] = String(value);
    else throw new ApiError('invalid_parameter', `Invalid '${key}' in ${location}: expected ${stringOnly ? 'a string' : 'a string, number or boolean'}`, { param: key });
  }
  return out;
}

/** Whether a field's JSON Schema takes strings only (its types, its branches' and its enum values'). */
function announcesOnlyStrings(schema: JsonSchema | undefined): boolean {
  if (!schema) return false;
  const types = new Set<string>();
  const collect = (part: JsonSchema) => {
    const type = part['type'];
    for (const one of Array.isArray(type) ? type : type === undefined ? [] : [type]) types.add(String(one));
    for (const value of (part['enum'] as unknown[] | undefined) ?? []) types.add(typeof value);
    if ('const' in part) types.add(typeof part['const']);
    for (const branch of [...((part['anyOf'] as JsonSchema[] | undefined) ?? []), ...((part['oneOf'] as JsonSchema[] | undefined) ?? [])]) collect(branch);
  };
  collect(schema);
  return types.size === 1 && types.has('string');
}

type JsonSchema = Record<string, unknown>;

/** An operation's input and output as self-contained JSON Schemas (named parts under `$defs`). */
export interface OperationJsonSchemas {
  input: JsonSchema;
  output: JsonSchema;
}

const schemaCache = new WeakMap<AnyOperation, OperationJsonSchemas>();

/** The JSON Schemas of an operation's merged input and of its output (what an MCP tool announces). */
export function operationJsonSchemas(operation: AnyOperation): OperationJsonSchemas {
  let schemas = schemaCache.get(operation);
  if (!schemas) {
    schemas = { input: jsonSchema(combinedInputSchema(operation), 'input'), output: jsonSchema(operation.output, 'output') };
    schemaCache.set(operation, schemas);
  }
  return schemas;
}

function jsonSchema(schema: z.ZodType, io: 'input' | 'output'): JsonSchema {
  const { $schema: _dialect, ...converted } = z.toJSONSchema(schema, { target: 'draft-2020-12', unrepresentable: 'any', io }) as JsonSchema;
  // A registered (named) schema converts to a $ref into $defs: inline the top one, since MCP wants
  // the tool's schemas to be objects at the top; the other named parts stay under $defs.
  const ref = converted['$ref'];
  const defs = converted['$defs'] as Record<string, JsonSchema> | undefined;
  if (typeof ref === 'string' && ref.startsWith('#/$defs/') && defs) {
    const top = defs[ref.slice('#/$defs/'.length)];
    if (top) return { ...top, $defs: defs };
  }
  return converted;
}
