import t from 'tap';
import { PUBLIC_BODY_LIMIT_BYTES } from '../../core/http/public-body-limit.ts';
import { buildTestApp, type TestApp } from '../helpers/app.ts';
import { RawConnection } from '../helpers/raw-http.ts';

/** A valid JSON sign-in of 10,000,000 bytes: under the 10 MiB JSON limit every other route has. */
const TEN_MB_SIGN_IN = JSON.stringify({ email: 'big@example.com', password: 'x'.repeat(10_000_000 - 50) });

/**
 * Counts JSON.parse calls given at least `minLength` characters while `run` runs: Fastify's JSON
 * parser ends in JSON.parse of the whole body (smaller parses, such as tsx loading a module, are not it).
 */
async function parsesOfAtLeast(minLength: number, run: () => Promise<unknown>): Promise<number> {
  const original = JSON.parse;
  let count = 0;
  JSON.parse = ((text: string, reviver?: Parameters<typeof JSON.parse>[1]) => {
    if (typeof text === 'string' && text.length >= minLength) count += 1;
    return original(text, reviver);
  }) as typeof JSON.parse;
  try {
    await run();
  } finally {
    JSON.parse = original;
  }
  return count;
}

let sharedApp: Promise<TestApp> | null = null;
const shared = () => (sharedApp ??= buildTestApp(t));

for (const path of ['/client/auth/sign-in', '/client/auth/set-password']) {
  t.test(`a 10 MB body on ${path} is answered 413 request_too_large without being parsed`, async (t) => {
    const test = await shared();
    let response!: Awaited<ReturnType<TestApp['call']>>;
    const parses = await parsesOfAtLeast(1_000_000, async () => {
      response = await test.call('POST', path, { token: null, body: TEN_MB_SIGN_IN, headers: { 'content-type': 'application/json' } });
    });
    t.equal(response.statusCode, 413, response.body);
    t.equal(response.json().error.code, 'request_too_large');
    t.match(response.json().error.message, `${PUBLIC_BODY_LIMIT_BYTES / 1024} KB`);
    t.equal(parses, 0, 'the body never reached the JSON parser');
  });
}

t.test('a 10 MB body to an unknown route is answered 404 without being parsed, and a wrong method 405 with Allow', async (t) => {
  const test = await shared();
  const headers = { 'content-type': 'application/json' };
  let unknown!: Awaited<ReturnType<TestApp['call']>>;
  let wrongMethod!: Awaited<ReturnType<TestApp['call']>>;
  const parses = await parsesOfAtLeast(1_000_000, async () => {
    unknown = await test.call('POST', '/client/no-such-route', { token: null, body: TEN_MB_SIGN_IN, headers });
    wrongMethod = await test.call('PUT', '/client/auth/sign-in', { token: null, body: TEN_MB_SIGN_IN, headers });
  });
  t.equal(unknown.statusCode, 404, unknown.body);
  t.equal(unknown.json().error.code, 'route_not_found');
  t.equal(wrongMethod.statusCode, 405, wrongMethod.body);
  t.equal(wrongMethod.json().error.code, 'method_not_allowed');
  t.equal(wrongMethod.headers.allow, 'POST');
  t.ok(unknown.headers['x-request-id'], 'answered like any other request');
  t.equal(parses, 0, 'neither body reached the JSON parser');
});

t.test('a body just over the public limit is refused and one within it is read', async (t) => {
  const test = await shared();
  const fields = { email: 'edge@example.com', password: 'a wrong password', pad: '' };
  const body = (size: number) => JSON.stringify({ ...fields, pad: 'x'.repeat(size - JSON.stringify(fields).length) });
  t.equal(body(PUBLIC_BODY_LIMIT_BYTES + 1).length, PUBLIC_BODY_LIMIT_BYTES + 1);
  const over = await test.call('POST', '/client/auth/sign-in', { token: null, body: body(PUBLIC_BODY_LIMIT_BYTES + 1), headers: { 'content-type': 'application/json' } });
  t.equal(over.statusCode, 413, over.body);
  const within = await test.call('POST', '/client/auth/sign-in', { token: null, body: body(PUBLIC_BODY_LIMIT_BYTES), headers: { 'content-type': 'application/json' } });
  t.equal(within.statusCode, 401, 'read, parsed and answered as a wrong password');
});

t.test('a route that takes a credential keeps the 10 MB JSON limit', async (t) => {
  const test = await shared();
  const response = await test.call('POST', '/client/keys', { body: { name: 'k'.repeat(PUBLIC_BODY_LIMIT_BYTES * 2) } });
  t.not(response.statusCode, 413, response.body);
});

t.test('a declared 10 MB sign-in body is refused before one byte of it is sent', async (t) => {
  const test = await buildTestApp(t);
  await test.app.listen({ host: '127.0.0.1', port: 0 });
  const head = 'POST /client/auth/sign-in HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\ncontent-length: 10000000\r\n\r\n';
  const connection = await RawConnection.open(test.app, head);
  t.teardown(() => connection.close());
  const response = await connection.response();
  t.equal(response.statusCode, 413, response.body);
  t.equal(JSON.parse(response.body).error.code, 'request_too_large');
});
