import t from 'tap';
import { buildTestApp, createKey } from '../helpers/app.ts';
import { assertEnvelope } from '../helpers/envelope.ts';
import { rawRequest } from '../helpers/raw-http.ts';

/*
 * Requests only a real socket can send: Node's HTTP parser refuses some before any route runs
 * (app.inject never reaches the parser), and repeated headers are folded before a route sees them.
 */
const METRICS_TOKEN = 'metrics-token-0123456789';
const test = await buildTestApp(t, { config: { metrics: { bearerToken: METRICS_TOKEN } } });
await test.app.listen({ host: '127.0.0.1', port: 0 });
const key = await createKey(test, { name: 'wire', scopes: ['inference', 'keys:read'] });

const TWENTY_KB = 'a'.repeat(20 * 1024);

t.test('a request whose errors the HTTP parser answers gets the envelope, a request id, and a closed connection', async (t) => {
  const cases: Array<[string, string, number, string]> = [
    ['a 20 KB header', `GET /client/whoami HTTP/1.1\r\nHost: x\r\nX-Big: ${TWENTY_KB}\r\n\r\n`, 431, 'request_header_too_large'],
    ['a 20 KB URL', `GET /client/whoami?q=${TWENTY_KB} HTTP/1.1\r\nHost: x\r\n\r\n`, 431, 'request_header_too_large'],
    ['a control character in a header value', 'GET /client/whoami HTTP/1.1\r\nHost: x\r\nX-Odd: a\x01b\r\n\r\n', 400, 'malformed_request'],
    ['a control character in a header name', 'GET /client/whoami HTTP/1.1\r\nHost: x\r\nX-O\x02dd: ab\r\n\r\n', 400, 'malformed_request'],
    ['an unknown method', 'BREW /v1/models HTTP/1.1\r\nHost: x\r\n\r\n', 400, 'unsupported_method'],
    ['a request line that is not HTTP', 'hello there\r\n\r\n', 400, 'unsupported_method'],
    ['a CONNECT (a proxy tunnel request)', 'CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n', 405, 'method_not_allowed'],
  ];
  for (const [label, request, status, code] of cases) {
    await t.test(label, async (t) => {
      const { response, connection } = await rawRequest(test.app, request);
      assertEnvelope(t, response, status, { code });
      t.match(response.headers['x-request-id'], /^req_[0-9a-f]{32}$/, 'carries a request id');
      t.equal(response.headers.connection, 'close', 'says the connection closes');
      await connection.closed;
      t.ok(connection.ended, 'the connection is closed');
    });
  }
});

t.test('two Authorization headers answer 400 duplicate_authorization_header, whichever comes first', async (t) => {
  const bogus = `Bearer svc_live_${'x'.repeat(43)}`;
  const cases: Array<[string, string, string]> = [
    ['the owner session, then a bogus key', '/client/whoami', `Authorization: Bearer ${test.ownerToken}\r\nAuthorization: ${bogus}`],
    ['a bogus key, then the owner session', '/client/whoami', `Authorization: ${bogus}\r\nAuthorization: Bearer ${test.ownerToken}`],
    ['the same key twice', '/v1/models', `Authorization: Bearer ${key.key}\r\nAuthorization: Bearer ${key.key}`],
    ['the same key under two spellings of the name', '/v1/models', `authorization: Bearer ${key.key}\r\nAUTHORIZATION: Bearer ${key.key}`],
    ['the metrics token twice', '/metrics', `Authorization: Bearer ${METRICS_TOKEN}\r\nAuthorization: Bearer ${METRICS_TOKEN}`],
  ];
  for (const [label, path, headers] of cases) {
    await t.test(`${label} on ${path}`, async (t) => {
      const { response, connection } = await rawRequest(test.app, `GET ${path} HTTP/1.1\r\nHost: x\r\n${headers}\r\nConnection: close\r\n\r\n`);
      connection.close();
      assertEnvelope(t, response, 400, { code: 'duplicate_authorization_header', param: 'authorization' });
    });
  }
});

t.test('one Authorization header is served as before', async (t) => {
  for (const [path, token] of [
    ['/client/whoami', `Bearer ${test.ownerToken}`],
    ['/v1/models', `Bearer ${key.key}`],
    ['/metrics', `Bearer ${METRICS_TOKEN}`],
  ] as const) {
    const { response, connection } = await rawRequest(test.app, `GET ${path} HTTP/1.1\r\nHost: x\r\nAuthorization: ${token}\r\nConnection: close\r\n\r\n`);
    connection.close();
    t.equal(response.statusCode, 200, `${path}: 200 (${response.body.slice(0, 120)})`);
  }
});
