import { randomUUID } from 'node:crypto';
import type { LightMyRequestResponse } from 'fastify';
import t from 'tap';
import type { z } from 'zod';
import type { AnyOperation } from '../../core/operations/operations.ts';
import { Tokens } from '../../core/kernel/di-tokens.ts';
import { fillPath, inputJsonSchema, pathParamNames, primary, sampleBody, sampleBodyIsValid, sampleValue, typesOf, type JsonSchema } from '../fixtures/operation-inputs.ts';
import { buildTestApp, createKey } from '../helpers/app.ts';

/** The assertions the helpers below use; satisfied by the root test and by subtests. */
type Tap = Pick<typeof t, 'ok' | 'notOk' | 'equal' | 'not' | 'same' | 'match' | 'fail'>;

/*
 * Malformed input on every operation of the registry: whatever the body or query holds, the answer
 * is a 4xx in the envelope, never a 5xx. Bodies and fields are derived from each operation's schema.
 */
const ONE_MB = 1024 * 1024;
const test = await buildTestApp(t);
const operations: AnyOperation[] = test.app.svc.container.resolve(Tokens.Operations).list();
const withBody = operations.filter((op) => op.body);

// Real resources for path parameters, so a valid-but-odd body reaches the handler and the database.
const targetKey = await createKey(test, { name: 'malformed-input target' });
const targetProject = (await test.call('POST', '/client/projects', { body: { name: 'malformed-input target' } })).json() as { id: string };
const ownerPersonId = ((await test.call('GET', '/client/whoami')).json() as { credential: { personId: string } }).credential.personId;

function realPathValues(operation: AnyOperation): Record<string, string> {
  const id = operation.name.startsWith('keys.') ? targetKey.id : operation.name.startsWith('projects.') ? targetProject.id : randomUUID();
  return { id, userId: ownerPersonId };
}

const urlFor = (operation: AnyOperation, values: Record<string, string> = realPathValues(operation)) => `/client${fillPath(operation, values)}`;

function send(operation: AnyOperation, payload: string, url = urlFor(operation)): Promise<LightMyRequestResponse> {
  return test.app.inject({
    method: operation.method,
    url,
    headers: { authorization: `Bearer ${test.ownerToken}`, 'content-type': 'application/json' },
    payload,
  });
}

const describe = (operation: AnyOperation, response: LightMyRequestResponse) =>
  `${operation.name}: ${operation.method} ${operation.path} -> ${response.statusCode} ${response.body.slice(0, 160)}`;

/** A 4xx in the spec's envelope; returns the envelope's param. */
function assert4xx(t: Tap, operation: AnyOperation, response: LightMyRequestResponse, what: string): string | null | undefined {
  const ok = response.statusCode >= 400 && response.statusCode < 500;
  t.ok(ok, `${what}: 4xx (${describe(operation, response)})`);
  let error: Record<string, unknown> | undefined;
  try {
    const body = response.json() as Record<string, unknown>;
    if (Object.keys(body).length === 1) error = body.error as Record<string, unknown>;
  } catch {
    error = undefined;
  }
  t.same(error ? Object.keys(error).sort() : null, ['code', 'message', 'param', 'type'], `${what}: in the envelope`);
  return error?.param as string | null | undefined;
}

/** 400 exactly, in the envelope; returns the error's param. */
function assert400(t: Tap, operation: AnyOperation, response: LightMyRequestResponse, what: string): string | null | undefined {
  t.equal(response.statusCode, 400, `${what}: 400 (${describe(operation, response)})`);
  return assert4xx(t, operation, response, what);
}

/** Never a 5xx; an error, if any, is in the envelope. */
function assertNo5xx(t: Tap, operation: AnyOperation, response: LightMyRequestResponse, what: string): void {
  t.ok(response.statusCode < 500, `${what}: no 5xx (${describe(operation, response)})`);
  if (response.statusCode >= 400) {
    const body = response.json() as { error?: object };
    t.same(Object.keys(body.error ?? {}).sort(), ['code', 'message', 'param', 'type'], `${what}: error in the envelope`);
  }
}

interface FieldCase {
  path: string[];
  schema: JsonSchema;
}

/** Every property of a body schema, descending into nested objects. */
function fieldCases(schema: JsonSchema, path: string[] = []): FieldCase[] {
  const object = primary(schema);
  const out: FieldCase[] = [];
  for (const [name, property] of Object.entries(object.properties ?? {})) {
    out.push({ path: [...path, name], schema: property });
    const inner = primary(property);
    if (inner.type === 'object' && inner.properties && path.length < 3) out.push(...fieldCases(inner, [...path, name]));
  }
  return out;
}

/** A copy of `body` with `value` at `path`, filling missing parents with sample values. */
function withValue(body: Record<string, unknown>, schema: JsonSchema, path: string[], value: unknown): Record<string, unknown> {
  const root = structuredClone(body);
  let node: Record<string, unknown> = root;
  let nodeSchema = primary(schema);
  path.forEach((segment, index) => {
    if (index === path.length - 1) {
      node[segment] = value;
      return;
    }
    const childSchema = primary(nodeSchema.properties?.[segment] ?? {});
    const existing = node[segment];
    if (typeof existing !== 'object' || existing === null || Array.isArray(existing)) node[segment] = sampleValue(childSchema);
    node = node[segment] as Record<string, unknown>;
    nodeSchema = childSchema;
  });
  return root;
}

const jsonType = (value: unknown) => (Array.isArray(value) ? 'array' : value === null ? 'null' : typeof value);

/** A value of a JSON type the field does not accept. */
function wrongTypeFor(schema: JsonSchema): unknown {
  const accepted = new Set(typesOf(schema).map((t) => (t === 'integer' ? 'number' : t)));
  return [12345, 'a string', true, { nested: true }, [1]].find((value) => !accepted.has(jsonType(value)));
}

/** A free-text field: a string without format, enum or pattern. */
function isFreeText(schema: JsonSchema): boolean {
  const inner = primary(schema);
  return typesOf(schema).join() === 'string' && !inner.format && !inner.enum && !inner.pattern && !('const' in inner);
}

function isFreeTextList(schema: JsonSchema): boolean {
  const inner = primary(schema);
  return inner.type === 'array' && inner.items !== undefined && isFreeText(inner.items);
}

const deepObject = (levels: number) => `${'{"a":'.repeat(levels)}1${'}'.repeat(levels)}`;
const deepArray = (levels: number) => '['.repeat(levels) + ']'.repeat(levels);

/** The valid sample body as JSON with one more raw member appended. */
function appendMember(body: Record<string, unknown>, rawMember: string): string {
  const text = JSON.stringify(body);
  return text === '{}' ? `{${rawMember}}` : `${text.slice(0, -1)},${rawMember}}`;
}

const UNICODE_ODDITIES = [
  'nul \u0000 inside',
  '\u0000',
  'lone surrogate \ud800 here',
  'trailing lone surrogate \udfff',
  'right-to-left \u202e override',
  '\ufeffbyte order mark',
  'zero\u200bwidth\u200djoiners',
  'combining e\u0301\u0301\u0301',
  'family 👩‍👩‍👧‍👦 emoji',
  'C1 controls \u0085\u009f',
  'non-character \uffff\ufffe',
  'astral 𝕏 plane',
  'line\nbreak\r\ttab',
];

t.test('every operation with a body has a valid sample body (add new ones to BODY_OVERRIDES)', async (t) => {
  t.ok(withBody.length > 0, 'there are operations with bodies');
  for (const operation of withBody) t.ok(sampleBodyIsValid(operation), operation.name);
});

t.test('a body that is not a JSON object answers 4xx on every operation', async (t) => {
  for (const operation of withBody) {
    const valid = JSON.stringify(sampleBody(operation));
    for (const [what, payload] of [
      ['an array instead of an object', `[${valid}]`],
      ['an empty array', '[]'],
      ['null', 'null'],
      ['a string', '"hello"'],
      ['an empty string', '""'],
      ['a number', '42'],
      ['a boolean', 'true'],
    ] as const) {
      assert4xx(t, operation, await send(operation, payload), `${operation.name}: ${what}`);
    }
  }
});

t.test('an empty object answers 400 on every operation that needs fields', async (t) => {
  for (const operation of withBody) {
    if ((operation.body as z.ZodType).safeParse({}).success) continue;
    const response = await send(operation, '{}');
    t.equal(response.statusCode, 400, describe(operation, response));
    assert400(t, operation, response, `${operation.name}: {}`);
  }
});

t.test('an object nested 5,000 levels deep answers 4xx on every operation', async (t) => {
  const deep = deepObject(5000);
  for (const operation of withBody) {
    const body = sampleBody(operation) ?? {};
    assert4xx(t, operation, await send(operation, deep), `${operation.name}: as the whole body`);
    assert4xx(t, operation, await send(operation, appendMember(body, `"nested":${deep}`)), `${operation.name}: as an extra field`);
    for (const field of Object.keys(primary(inputJsonSchema(operation.body as z.ZodType)).properties ?? {})) {
      const payload = JSON.stringify({ ...body, [field]: '__DEEP__' }).replace('"__DEEP__"', deep);
      assert4xx(t, operation, await send(operation, payload), `${operation.name}: as the value of ${field}`);
    }
  }
});

t.test('an array nested 100,000 levels deep answers 4xx, not a crash', async (t) => {
  const deep = deepArray(100_000);
  for (const operation of withBody) assert4xx(t, operation, await send(operation, deep), `${operation.name}: deep array body`);
});

t.test('a 1 MB string in any string field answers 4xx', async (t) => {
  const huge = 'x'.repeat(ONE_MB);
  for (const operation of withBody) {
    const schema = inputJsonSchema(operation.body as z.ZodType);
    const body = sampleBody(operation) ?? {};
    for (const field of fieldCases(schema)) {
      const types = typesOf(field.schema);
      const inner = primary(field.schema);
      if (types.includes('string')) {
        assert4xx(t, operation, await send(operation, JSON.stringify(withValue(body, schema, field.path, huge))), `${operation.name}: 1 MB ${field.path.join('.')}`);
      } else if (inner.type === 'array' && inner.items && typesOf(inner.items).includes('string')) {
        assert4xx(t, operation, await send(operation, JSON.stringify(withValue(body, schema, field.path, [huge]))), `${operation.name}: 1 MB item in ${field.path.join('.')}`);
      }
    }
  }
});

t.test('a 1 MB string in an unknown field answers 400 naming the field', async (t) => {
  const huge = 'x'.repeat(ONE_MB);
  for (const operation of withBody) {
    const param = assert400(t, operation, await send(operation, JSON.stringify({ ...sampleBody(operation), padding: huge })), `${operation.name}: padding`);
    t.equal(param, 'padding', `${operation.name}: param names the field`);
  }
});

t.test('unicode oddities in free-text fields never cause a 5xx', async (t) => {
  let checked = 0;
  for (const operation of withBody) {
    const schema = inputJsonSchema(operation.body as z.ZodType);
    for (const field of fieldCases(schema)) {
      const list = isFreeTextList(field.schema);
      if (!isFreeText(field.schema) && !list) continue;
      for (const oddity of UNICODE_ODDITIES) {
        checked += 1;
        const body = withValue(sampleBody(operation) ?? {}, schema, field.path, list ? [oddity] : oddity);
        assertNo5xx(t, operation, await send(operation, JSON.stringify(body)), `${operation.name}: ${field.path.join('.')} = ${JSON.stringify(oddity)}`);
      }
    }
  }
  t.ok(checked > 0, `free-text fields were found (${checked} cases)`);
});

t.test('a __proto__ key answers 4xx and pollutes nothing', async (t) => {
  for (const operation of withBody) {
    const body = sampleBody(operation) ?? {};
    assert4xx(t, operation, await send(operation, appendMember(body, '"__proto__":{"polluted":true}')), `${operation.name}: top-level __proto__`);
    const first = Object.keys(body)[0];
    if (first) {
      const payload = JSON.stringify({ ...body, [first]: '__X__' }).replace('"__X__"', '{"__proto__":{"polluted":true}}');
      assert4xx(t, operation, await send(operation, payload), `${operation.name}: nested __proto__`);
    }
  }
  t.equal(({} as Record<string, unknown>).polluted, undefined, 'Object.prototype is untouched');
});

t.test('constructor keys answer 4xx and pollute nothing', async (t) => {
  for (const operation of withBody) {
    const body = sampleBody(operation) ?? {};
    assert4xx(t, operation, await send(operation, appendMember(body, '"constructor":{"prototype":{"polluted":true}}')), `${operation.name}: constructor.prototype`);
    const param = assert4xx(t, operation, await send(operation, appendMember(body, '"constructor":1')), `${operation.name}: constructor`);
    t.equal(param, 'constructor', `${operation.name}: names constructor as the unknown field`);
  }
  t.equal(({} as Record<string, unknown>).polluted, undefined, 'Object.prototype is untouched');
});

t.test('numbers and booleans sent as strings answer 400 naming the field', async (t) => {
  let checked = 0;
  for (const operation of withBody) {
    const schema = inputJsonSchema(operation.body as z.ZodType);
    for (const field of fieldCases(schema)) {
      const types = typesOf(field.schema);
      if (types.includes('string') || !types.some((type) => ['number', 'integer', 'boolean'].includes(type))) continue;
      checked += 1;
      const value = String(types.includes('boolean') ? true : sampleValue(field.schema));
      const response = await send(operation, JSON.stringify(withValue(sampleBody(operation) ?? {}, schema, field.path, value)));
      const param = assert4xx(t, operation, response, `${operation.name}: ${field.path.join('.')} = ${JSON.stringify(value)}`);
      t.equal(response.statusCode, 400, `${operation.name}: 400`);
      t.equal(param, field.path.join('.'), `${operation.name}: param names ${field.path.join('.')}`);
    }
  }
  t.ok(checked > 0, `fields were checked (${checked})`);
});

t.test('a number too large for JSON doubles answers 400 naming the field', async (t) => {
  let checked = 0;
  for (const operation of withBody) {
    const schema = inputJsonSchema(operation.body as z.ZodType);
    for (const field of fieldCases(schema)) {
      const types = typesOf(field.schema);
      if (!types.includes('number') && !types.includes('integer')) continue;
      checked += 1;
      const payload = JSON.stringify(withValue(sampleBody(operation) ?? {}, schema, field.path, '__BIG__')).replace('"__BIG__"', '1e309');
      const param = assert400(t, operation, await send(operation, payload), `${operation.name}: ${field.path.join('.')} = 1e309`);
      t.equal(param, field.path.join('.'), `${operation.name}: param names ${field.path.join('.')}`);
    }
  }
  t.ok(checked > 0, `fields were checked (${checked})`);
});

t.test('a field of the wrong type answers 400 naming the field', async (t) => {
  let checked = 0;
  for (const operation of withBody) {
    const schema = inputJsonSchema(operation.body as z.ZodType);
    for (const field of fieldCases(schema)) {
      const wrong = wrongTypeFor(field.schema);
      if (wrong === undefined) continue;
      checked += 1;
      const response = await send(operation, JSON.stringify(withValue(sampleBody(operation) ?? {}, schema, field.path, wrong)));
      const param = assert400(t, operation, response, `${operation.name}: ${field.path.join('.')} = ${JSON.stringify(wrong)}`);
      t.equal(response.statusCode, 400, `${operation.name}: 400`);
      t.equal(param, field.path.join('.'), `${operation.name}: param names ${field.path.join('.')}`);
    }
  }
  t.ok(checked > 0, `fields were checked (${checked})`);
});

t.test('an extra field answers 400 naming it', async (t) => {
  for (const operation of withBody) {
    const response = await send(operation, JSON.stringify({ ...sampleBody(operation), extraField: 1 }));
    const param = assert400(t, operation, response, `${operation.name}: extraField`);
    t.equal(response.statusCode, 400);
    t.equal(param, 'extraField', `${operation.name}: param names extraField`);
  }
});

t.test('an extra field inside a nested object answers 400 naming its path', async (t) => {
  let checked = 0;
  for (const operation of withBody) {
    const schema = inputJsonSchema(operation.body as z.ZodType);
    for (const field of fieldCases(schema)) {
      const inner = primary(field.schema);
      if (inner.type !== 'object' || inner.additionalProperties !== false) continue;
      checked += 1;
      const nested = { ...(sampleValue(inner) as Record<string, unknown>), extraField: 1 };
      const param = assert400(
        t,
        operation,
        await send(operation, JSON.stringify(withValue(sampleBody(operation) ?? {}, schema, field.path, nested))),
        `${operation.name}: ${field.path.join('.')}.extraField`,
      );
      t.equal(param, [...field.path, 'extraField'].join('.'), `${operation.name}: param names the nested field`);
    }
  }
  t.ok(checked > 0, `nested strict objects were checked (${checked})`);
});

t.test('a body on an operation that takes none answers 400', async (t) => {
  for (const operation of operations) {
    if (operation.body || operation.method === 'GET') continue;
    // Random ids: if the body were ignored, nothing real is touched.
    const url = `/client${fillPath(operation)}`;
    const response = await send(operation, JSON.stringify({ surprise: true }), url);
    t.equal(response.statusCode, 400, describe(operation, response));
    assert400(t, operation, response, `${operation.name}: unexpected body`);
  }
});

/** A query value the field cannot accept, when one is certain to exist. */
function wrongQueryValue(schema: JsonSchema): string | null {
  const inner = primary(schema);
  if (inner.enum || 'const' in inner) return 'yes-not-an-allowed-value';
  if (inner.format === 'uuid') return 'not-a-uuid';
  const types = typesOf(schema);
  if (types.includes('integer') || types.includes('number')) return 'not-a-number';
  if (types.includes('boolean')) return 'maybe';
  return null;
}

t.test('a query parameter of the wrong type answers 400 naming it, on every operation', async (t) => {
  let checked = 0;
  for (const operation of operations) {
    for (const [name, field] of Object.entries((operation.query?.shape ?? {}) as Record<string, z.ZodType>)) {
      const wrong = wrongQueryValue(inputJsonSchema(field));
      if (wrong === null) continue;
      checked += 1;
      const url = `/client${fillPath(operation)}?${new URLSearchParams({ [name]: wrong }).toString()}`;
      const response = await test.call(operation.method, url);
      t.equal(response.statusCode, 400, describe(operation, response));
      t.equal(assert400(t, operation, response, `${operation.name}: ${name}=${wrong}`), name, `${operation.name}: param names ${name}`);
    }
  }
  t.ok(checked > 0, `query parameters were checked (${checked})`);
});

t.test('permanent=yes on key deletion answers 400 naming permanent', async (t) => {
  const key = await createKey(test, { name: 'not deleted' });
  for (const value of ['yes', 'TRUE', '1', '']) {
    const response = await test.call('DELETE', `/client/keys/${key.id}?permanent=${value}`);
    t.equal(response.statusCode, 400, `permanent=${value}: ${response.body}`);
    t.equal((response.json() as { error: { param: string } }).error.param, 'permanent');
  }
  const repeated = await test.call('DELETE', `/client/keys/${key.id}?permanent=true&permanent=true`);
  t.equal(repeated.statusCode, 400, `a repeated permanent: ${repeated.body}`);
  t.equal((await test.call('GET', `/client/keys/${key.id}`)).json().status, 'active', 'the key was left alone');
});

t.test('a non-uuid projectId filter answers 400 naming projectId', async (t) => {
  const response = await test.call('GET', '/client/keys?projectId=not-a-uuid');
  t.equal(response.statusCode, 400);
  t.equal((response.json() as { error: { param: string } }).error.param, 'projectId');
});

t.test('a non-uuid path id answers 400 naming the parameter, on every operation', async (t) => {
  for (const operation of operations) {
    const shape = (operation.params?.shape ?? {}) as Record<string, z.ZodType>;
    for (const name of pathParamNames(operation)) {
      const field = shape[name];
      if (!field || primary(inputJsonSchema(field)).format !== 'uuid') continue;
      for (const bad of ['not-a-uuid', "1' OR '1'='1", '0'.repeat(99)]) {
        const body = sampleBody(operation);
        const response = await test.call(operation.method, `/client${fillPath(operation, { [name]: bad })}`, body !== undefined ? { body } : {});
        t.equal(response.statusCode, 400, describe(operation, response));
        t.equal(assert400(t, operation, response, `${operation.name}: ${name}=${bad.slice(0, 20)}`), name, `${operation.name}: param names ${name}`);
      }
    }
  }
});

t.test('a path id longer than the router accepts answers 4xx in the envelope with x-request-id', async (t) => {
  for (const operation of operations) {
    for (const name of pathParamNames(operation)) {
      const body = sampleBody(operation);
      const response = await test.call(operation.method, `/client${fillPath(operation, { [name]: '0'.repeat(300) })}`, body !== undefined ? { body } : {});
      assert4xx(t, operation, response, `${operation.name}: a 300-character ${name}`);
      t.ok(response.headers['x-request-id'], `${operation.name}: carries x-request-id`);
    }
  }
});
