import { randomUUID } from 'node:crypto';
import type { LightMyRequestResponse } from 'fastify';
import t from 'tap';
import { manifest as defaultManifest } from '../../plugins/index.ts';
import { LEAKED_SECRET, throwingPlugin } from '../fixtures/throwing-plugin.ts';
import { allPlugins, buildTestApp, createKey } from '../helpers/app.ts';
import { assertEnvelope } from '../helpers/envelope.ts';

const TEN_MB = 10 * 1024 * 1024;
const manifest = [...defaultManifest, throwingPlugin];
const test = await buildTestApp(t, { manifest, plugins: allPlugins(manifest) });

/** A raw request with the owner's token unless `token` is null. */
function raw(method: string, url: string, options: { payload?: string | Buffer; contentType?: string; token?: string | null; headers?: Record<string, string> } = {}) {
  const token = options.token === undefined ? test.ownerToken : options.token;
  return test.app.inject({
    method: method as 'POST',
    url,
    headers: {
      ...(token ? { authorization: `Bearer ${token}` } : {}),
      ...(options.contentType ? { 'content-type': options.contentType } : {}),
      ...options.headers,
    },
    ...(options.payload !== undefined ? { payload: options.payload } : {}),
  });
}

t.test('an unknown route answers 404 in the envelope on every surface', async (t) => {
  for (const [method, url] of [
    ['GET', '/v1/no-such-route'],
    ['POST', '/v1/chat/no-such-route'],
    ['GET', '/client/no-such-route'],
    ['DELETE', '/client/keys/extra/segments/here'],
    ['GET', '/platform/v1/no-such-route'],
    ['GET', '/mcp/no-such-route'],
    ['POST', '/mcp/no-such/route'],
    ['GET', '/no-such-route'],
    ['GET', '/no/such/route?x=1'],
  ] as const) {
    await t.test(`${method} ${url}`, async (t) => {
      assertEnvelope(t, await raw(method, url), 404);
    });
  }
});

t.test('an unknown route answers 404, not 401, without a credential', async (t) => {
  for (const url of ['/v1/no-such-route', '/client/no-such-route', '/mcp/no-such-route', '/no-such-route']) {
    assertEnvelope(t, await raw('GET', url, { token: null }), 404);
  }
});

t.test('a wrong method on a known path answers 405 with an allow header', async (t) => {
  const cases: Array<[string, string, string[]]> = [
    ['PUT', '/client/keys', ['GET', 'POST']],
    ['PUT', `/client/keys/${randomUUID()}`, ['GET', 'PATCH', 'DELETE']],
    ['POST', `/platform/v1/keys/${randomUUID()}`, ['GET', 'PATCH', 'DELETE']],
    ['DELETE', '/client/whoami', ['GET']],
    ['POST', '/', ['GET']],
  ];
  for (const [method, url, allowed] of cases) {
    await t.test(`${method} ${url}`, async (t) => {
      const response = await raw(method, url);
      assertEnvelope(t, response, 405);
      const allow = String(response.headers.allow ?? '')
        .split(/,\s*/)
        .filter(Boolean);
      for (const m of allowed) t.ok(allow.includes(m), `allow lists ${m} (${allow.join(', ')})`);
      t.notOk(allow.includes(method), `allow does not list ${method}`);
    });
  }
});

t.test('malformed JSON answers 400 in the envelope', async (t) => {
  for (const payload of ['{"name":', '{name: "x"}', "{'name':'x'}", '{"name":"x",}', 'NaN']) {
    assertEnvelope(t, await raw('POST', '/client/keys', { payload, contentType: 'application/json' }), 400);
  }
});

t.test('an empty body declared as JSON answers 400 in the envelope', async (t) => {
  assertEnvelope(t, await raw('POST', '/client/keys', { payload: '', contentType: 'application/json' }), 400);
});

t.test('a missing body on an operation that needs one answers 400 in the envelope', async (t) => {
  assertEnvelope(t, await raw('POST', '/client/keys'), 400);
});

t.test('an unsupported content type answers 415 in the envelope', async (t) => {
  for (const contentType of ['application/xml', 'application/x-www-form-urlencoded', 'multipart/form-data; boundary=x', 'image/png']) {
    await t.test(contentType, async (t) => {
      assertEnvelope(t, await raw('POST', '/client/keys', { payload: '<key><name>x</name></key>', contentType }), 415);
    });
  }
});

t.test('a body that is not JSON text answers 4xx in the envelope', async (t) => {
  const response = await raw('POST', '/client/keys', { payload: '{"name":"x"}', contentType: 'text/plain' });
  t.ok(response.statusCode === 400 || response.statusCode === 415, `400 or 415 (got ${response.statusCode})`);
  assertEnvelope(t, response, response.statusCode);
});

t.test('an unknown body field answers 400 naming the field in param', async (t) => {
  const body = assertEnvelope(t, await test.call('POST', '/client/keys', { body: { name: 'x', colour: 'blue' } }), 400, { param: 'colour' });
  t.match(body?.error.message ?? '', /colour/, 'the message names the field');
});

t.test('an unknown nested body field answers 400 naming its path in param', async (t) => {
  assertEnvelope(t, await test.call('POST', '/client/keys', { body: { name: 'x', spendCap: { usd: 5, colour: 'blue' } } }), 400, {
    param: 'spendCap.colour',
  });
});

t.test('a body field of the wrong type answers 400 naming the field', async (t) => {
  const body = assertEnvelope(t, await test.call('POST', '/client/keys', { body: { name: 42 } }), 400, { param: 'name' });
  t.match(body?.error.message ?? '', /name/, 'the message names the field');
});

t.test('a nested body field of the wrong type answers 400 naming its path', async (t) => {
  assertEnvelope(t, await test.call('POST', '/client/keys', { body: { name: 'x', spendCap: { usd: 'five' } } }), 400, { param: 'spendCap.usd' });
});

t.test('a body over 10 MB answers 413 request_too_large', async (t) => {
  const payload = Buffer.alloc(TEN_MB + 1, 0x20);
  payload.write('{"name":"');
  payload.write('"}', TEN_MB - 1);
  assertEnvelope(t, await raw('POST', '/client/keys', { payload, contentType: 'application/json' }), 413, { code: 'request_too_large' });
});

t.test('a body of exactly 10 MB is read, not refused as too large', async (t) => {
  const payload = Buffer.alloc(TEN_MB, 0x61);
  payload.write('{"name":"');
  payload.write('"}', TEN_MB - 2);
  const response = await raw('POST', '/client/keys', { payload, contentType: 'application/json' });
  assertEnvelope(t, response, 400, { param: 'name' });
});

t.test('a body over 10 MB without a credential answers 401, not 413', async (t) => {
  const payload = Buffer.alloc(TEN_MB + 1, 0x20);
  assertEnvelope(t, await raw('POST', '/client/keys', { payload, contentType: 'application/json', token: null }), 401);
});

t.test('a missing credential answers 401 in the envelope', async (t) => {
  assertEnvelope(t, await raw('GET', '/client/keys', { token: null }), 401);
  assertEnvelope(t, await raw('GET', '/client/keys', { token: null, headers: { authorization: '' } }), 401);
  assertEnvelope(t, await raw('GET', '/client/keys', { token: null, headers: { authorization: 'Bearer' } }), 401);
});

t.test('an invalid credential answers 401 in the envelope', async (t) => {
  for (const authorization of [
    `Bearer svc_live_${'x'.repeat(40)}`,
    `Bearer svc_sess_${'x'.repeat(40)}`,
    'Bearer not-a-key',
    `Basic ${Buffer.from('user:pass').toString('base64')}`,
    `Bearer ${test.ownerToken} trailing`,
  ]) {
    assertEnvelope(t, await raw('GET', '/client/keys', { token: null, headers: { authorization } }), 401);
  }
});

t.test('a revoked key answers 401 in the envelope', async (t) => {
  const key = await createKey(test, { scopes: ['keys:read'] });
  t.equal((await test.call('DELETE', `/client/keys/${key.id}`)).statusCode, 200);
  assertEnvelope(t, await test.call('GET', '/client/keys', { token: key.key }), 401);
});

t.test('a key without the needed scope answers 403 missing_scope in the envelope', async (t) => {
  const key = await createKey(test, { scopes: ['inference'] });
  assertEnvelope(t, await test.call('GET', '/client/keys', { token: key.key }), 403, { code: 'missing_scope' });
});

t.test('a thrown internal error answers 500 without leaking its message', async (t) => {
  for (const url of ['/client/fixture/throws', '/platform/v1/fixture/throws', '/client/fixture/bad-output', '/v1/fixture/throws', '/v1/fixture/throws-sync', '/v1/fixture/throws-string']) {
    await t.test(url, async (t) => {
      const response = await test.call('GET', url);
      assertEnvelope(t, response, 500);
      t.notOk(response.body.includes('hunter2'), 'the secret in the original error does not leak');
      t.notOk(response.body.includes(LEAKED_SECRET), 'the original message does not leak');
      t.notOk(/exploded|cannot read|at .*\.ts:\d+/.test(response.body), 'neither the message nor a stack trace leaks');
    });
  }
});

t.test('a malformed percent-encoding in the URL answers 400 in the envelope', async (t) => {
  for (const url of ['/client/keys/%E0%A4%A', '/client/%', '/v1/%zz']) {
    await t.test(url, async (t) => {
      const response = await raw('GET', url);
      assertEnvelope(t, response, 400);
      t.ok(response.headers['x-request-id'], 'carries x-request-id');
    });
  }
});

t.test('x-request-id is on every response, errors included', async (t) => {
  const key = await createKey(test, { scopes: ['inference'] });
  const responses: Array<[string, LightMyRequestResponse]> = [
    ['200', await test.call('GET', '/client/whoami')],
    ['200 unauthenticated route', await raw('GET', '/health', { token: null })],
    ['400', await test.call('POST', '/client/keys', { body: { name: 42 } })],
    ['400 bad JSON', await raw('POST', '/client/keys', { payload: '{', contentType: 'application/json' })],
    ['401', await raw('GET', '/client/keys', { token: null })],
    ['403', await test.call('GET', '/client/keys', { token: key.key })],
    ['404 route', await raw('GET', '/v1/no-such-route')],
    ['404 resource', await test.call('GET', `/client/keys/${randomUUID()}`)],
    ['405', await raw('PUT', '/client/keys')],
    ['413', await raw('POST', '/client/keys', { payload: Buffer.alloc(TEN_MB + 1, 0x20), contentType: 'application/json' })],
    ['415', await raw('POST', '/client/keys', { payload: '<x/>', contentType: 'application/xml' })],
    ['500', await test.call('GET', '/client/fixture/throws')],
  ];
  const seen = new Set<string>();
  for (const [label, response] of responses) {
    const id = response.headers['x-request-id'];
    t.ok(typeof id === 'string' && id.length > 0, `${label} carries x-request-id`);
    if (typeof id === 'string') seen.add(id);
  }
  t.equal(seen.size, responses.length, 'each response has its own request id');
});

t.test('a caller’s own safe x-request-id comes back as x-client-request-id; x-request-id stays the gateway’s', async (t) => {
  for (const id of ['abc-123', 'trace.span:42_x', 'A'.repeat(128)]) {
    const response = await test.call('GET', '/client/whoami', { headers: { 'x-request-id': id } });
    t.equal(response.headers['x-client-request-id'], id, `echoes ${id.slice(0, 20)}`);
    t.match(String(response.headers['x-request-id']), /^req_[0-9a-f]{32}$/, 'the request id is issued by the gateway');
  }
});

t.test('a caller’s own x-request-id comes back on errors too', async (t) => {
  const id = `err-${randomUUID()}`;
  t.equal((await raw('GET', '/client/keys', { token: null, headers: { 'x-request-id': id } })).headers['x-client-request-id'], id, 'on a 401');
  t.equal((await raw('GET', '/v1/no-such-route', { headers: { 'x-request-id': id } })).headers['x-client-request-id'], id, 'on a 404');
});

t.test('an incoming unsafe x-request-id is not echoed', async (t) => {
  for (const id of ['has space', '<script>alert(1)</script>', 'quote"inside', 'A'.repeat(129), 'semi;colon', 'ünïcödé']) {
    const response = await test.call('GET', '/client/whoami', { headers: { 'x-request-id': id } });
    const echoed = response.headers['x-request-id'];
    t.ok(typeof echoed === 'string' && echoed.length > 0, 'a request id is still set');
    t.not(echoed, id, `replaces ${JSON.stringify(id.slice(0, 30))}`);
    t.match(String(echoed), /^[A-Za-z0-9._:-]{1,128}$/, 'with a safe one');
    t.equal(response.headers['x-client-request-id'], undefined, 'and not sent back');
  }
});
