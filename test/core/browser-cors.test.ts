import { request as httpRequest } from 'node:http';
import t from 'tap';
import { startGateway } from '../helpers/gateway.ts';

interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

/** One real HTTP request over loopback, headers exactly as given (a browser's preflight carries no credential). */
function send(url: string, method: string, headers: Record<string, string>, body?: string): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const outgoing = httpRequest(url, { method, headers }, (response) => {
      let text = '';
      response.setEncoding('utf8');
      response.on('data', (chunk: string) => (text += chunk));
      response.on('end', () => resolve({ status: response.statusCode ?? 0, headers: response.headers, body: text }));
    });
    outgoing.on('error', reject);
    outgoing.end(body);
  });
}

const PAGE = 'https://app.example';

t.test('browsers and the /v1 surface', async (t) => {
  const gw = await startGateway(t);
  const preflight = (path: string, method: string) =>
    send(`${gw.url}${path}`, 'OPTIONS', {
      origin: PAGE,
      'access-control-request-method': method,
      'access-control-request-headers': 'authorization, content-type, x-svc-dangerous-browser-access',
    });

  t.test('a preflight for chat completions is answered 204 without a key, allowing the three headers', async (t) => {
    const answer = await preflight('/v1/chat/completions', 'POST');
    t.equal(answer.status, 204, answer.body);
    t.equal(answer.headers['access-control-allow-origin'], PAGE);
    t.equal(answer.headers['access-control-allow-methods'], 'POST');
    const allowed = String(answer.headers['access-control-allow-headers']).split(/,\s*/);
    t.same(allowed.sort(), ['authorization', 'content-type', 'x-svc-dangerous-browser-access']);
  });

  t.test("a preflight also allows the other headers the page's SDK asks for, and only well-formed names", async (t) => {
    const answer = await send(`${gw.url}/v1/chat/completions`, 'OPTIONS', {
      origin: PAGE,
      'access-control-request-method': 'POST',
      'access-control-request-headers': 'content-type, x-stainless-os, x-stainless-retry-count, bad name, ',
    });
    t.equal(answer.status, 204, answer.body);
    const allowed = String(answer.headers['access-control-allow-headers']).split(/,\s*/);
    t.same(allowed.sort(), ['authorization', 'content-type', 'x-stainless-os', 'x-stainless-retry-count', 'x-svc-dangerous-browser-access']);
  });

  t.test('a preflight is answered on every /v1 route, including those under the browser rule', async (t) => {
    for (const [path, method] of [
      ['/v1/models', 'GET'],
      ['/v1/models/duo', 'GET'],
      ['/v1', 'GET'],
    ] as const) {
      const answer = await preflight(path, method);
      t.equal(answer.status, 204, `${method} ${path}: ${answer.body}`);
      t.equal(answer.headers['access-control-allow-origin'], PAGE);
    }
  });

  t.test('a preflight for a method or path /v1 does not serve is not answered with CORS', async (t) => {
    const unknown = await preflight('/v1/no-such-route', 'POST');
    t.equal(unknown.status, 404);
    t.equal(JSON.parse(unknown.body).error.code, 'route_not_found');
    t.equal(unknown.headers['access-control-allow-origin'], undefined);
    const wrongMethod = await preflight('/v1/chat/completions', 'DELETE');
    t.equal(wrongMethod.status, 405);
    t.equal(wrongMethod.headers['access-control-allow-origin'], undefined);
  });

  t.test('management routes answer no preflight: they take session cookies', async (t) => {
    const answer = await preflight('/client/keys', 'GET');
    t.equal(answer.status, 405);
    t.equal(answer.headers['access-control-allow-origin'], undefined);
  });

  t.test('an opted-in request may read the answer and its rate-limit and x-svc headers', async (t) => {
    gw.primary.enqueue({ kind: 'reply', content: 'Hi', usage: { prompt_tokens: 3, completion_tokens: 1 } });
    const answer = await send(
      `${gw.url}/v1/chat/completions`,
      'POST',
      { origin: PAGE, 'x-svc-dangerous-browser-access': 'true', authorization: `Bearer ${gw.key}`, 'content-type': 'application/json' },
      JSON.stringify({ model: 'duo', messages: [{ role: 'user', content: 'hello' }] }),
    );
    t.equal(answer.status, 200, answer.body);
    t.equal(answer.headers['access-control-allow-origin'], PAGE);
    const exposed = String(answer.headers['access-control-expose-headers']).split(/,\s*/);
    for (const header of ['x-ratelimit-remaining-requests', 'x-ratelimit-limit-requests', 'retry-after', 'x-svc-provider', 'x-request-id']) {
      t.ok(exposed.includes(header), `exposes ${header}`);
    }
    t.match(answer.headers.vary, /origin/i);
  });

  t.test('an Origin without the opt-in is 403 on the routes the browser rule names, and gets no CORS headers', async (t) => {
    const headers = { origin: PAGE, authorization: `Bearer ${gw.key}`, 'content-type': 'application/json' };
    for (const [method, path] of [
      ['GET', '/v1/models'],
      ['GET', '/v1/models/duo'],
      ['POST', '/v1/chat/completions'],
    ] as const) {
      const body = method === 'POST' ? JSON.stringify({ model: 'duo', messages: [{ role: 'user', content: 'x' }] }) : undefined;
      const answer = await send(`${gw.url}${path}`, method, headers, body);
      t.equal(answer.status, 403, `${method} ${path}`);
      t.equal(JSON.parse(answer.body).error.code, 'browser_access_denied');
      t.equal(answer.headers['access-control-allow-origin'], undefined);
    }
  });

  t.test('a route that does not declare the browser rule serves an Origin, without CORS headers unless opted in', async (t) => {
    const answer = await send(`${gw.url}/v1`, 'GET', { origin: PAGE, authorization: `Bearer ${gw.key}` });
    t.equal(answer.status, 200, answer.body);
    t.equal(answer.headers['access-control-allow-origin'], undefined);
  });
});
