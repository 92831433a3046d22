import Fastify from 'fastify';
import t from 'tap';
import { FORM_CSRF_FIELD, formCsrfPasses, formCsrfToken, html, sendPage } from '../../core/http/pages.ts';

/** A bare server with one page carrying a form, and a form handler answering whether the CSRF check passed. */
async function pageServer(t: { teardown(fn: () => unknown): void }) {
  const app = Fastify();
  app.addContentTypeParser('application/x-www-form-urlencoded', { parseAs: 'string' }, (_request, body, done) => done(null, Object.fromEntries(new URLSearchParams(body as string))));
  app.get('/page', async (request, reply) => {
    const csrf = formCsrfToken(request, reply, false);
    const name = (request.query as { name?: string }).name ?? '';
    return sendPage(reply, {
      title: `Hello ${name}`,
      formTargets: ['https://client.example'],
      body: html`<p>Hello ${name}</p><form method="post" action="/form"><input type="hidden" name="${FORM_CSRF_FIELD}" value="${csrf}"></form>`,
    });
  });
  app.post('/form', async (request) => ({ passes: formCsrfPasses(request, (request.body as Record<string, string>)[FORM_CSRF_FIELD], 'https://pages.example') }));
  t.teardown(() => app.close());
  return app;
}

t.test('a page escapes every interpolated value', async (t) => {
  const app = await pageServer(t);
  const page = await app.inject({ url: `/page?name=${encodeURIComponent('<script>alert("x")</script>')}` });
  t.notMatch(page.body, /<script>/);
  t.match(page.body, '<title>Hello &lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;</title>');
  t.match(page.body, '<p>Hello &lt;script&gt;');
});

t.test('a page allows no script, no framing and forms only to itself and the targets named', async (t) => {
  const app = await pageServer(t);
  const page = await app.inject({ url: '/page' });
  t.equal(page.headers['content-type'], 'text/html; charset=utf-8');
  t.equal(page.headers['content-security-policy'], "default-src 'none'; form-action 'self' https://client.example; frame-ancestors 'none'; base-uri 'none'");
  t.equal(page.headers['x-frame-options'], 'DENY');
  t.equal(page.headers['cache-control'], 'no-store');
});

t.test('a form passes the CSRF check with the token of its page, and only with it', async (t) => {
  const app = await pageServer(t);
  const page = await app.inject({ url: '/page' });
  const cookie = String(page.headers['set-cookie']).split(';')[0]!;
  t.match(String(page.headers['set-cookie']), /HttpOnly; SameSite=Strict/);
  const token = /name="csrf_token" value="([^"]+)"/.exec(page.body)![1]!;
  const post = (form: Record<string, string>, headers: Record<string, string>) =>
    app.inject({ method: 'POST', url: '/form', headers: { 'content-type': 'application/x-www-form-urlencoded', ...headers }, payload: new URLSearchParams(form).toString() });
  t.same((await post({ csrf_token: token }, { cookie })).json(), { passes: true });
  t.same((await post({ csrf_token: token }, {})).json(), { passes: false }, 'without the cookie');
  t.same((await post({ csrf_token: `${token.slice(0, -1)}x` }, { cookie })).json(), { passes: false }, 'another token');
  t.same((await post({}, { cookie })).json(), { passes: false }, 'without the field');
  t.same((await post({ csrf_token: token }, { cookie, origin: 'https://pages.example' })).json(), { passes: true }, 'from our own origin');
  t.same((await post({ csrf_token: token }, { cookie, origin: 'https://evil.example' })).json(), { passes: false }, 'from another origin');
  t.same((await post({ csrf_token: token }, { cookie, origin: 'null' })).json(), { passes: false }, 'from an opaque origin');
  t.same((await post({ csrf_token: token }, { cookie, 'sec-fetch-site': 'cross-site' })).json(), { passes: false }, 'a cross-site submission');
  const again = await app.inject({ url: '/page', headers: { cookie } });
  t.equal(again.headers['set-cookie'], undefined, 'the browser keeps its token across pages');
});
