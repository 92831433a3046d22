import { gunzipSync } from 'node:zlib';
import t, { type Test } from 'tap';
import { CONSOLE_CSP } from '../../../plugins/console/console-routes.ts';
import { allPlugins, buildTestApp } from '../../helpers/app.ts';
import { builtConsole, pluginsWithConsole } from './console-fixture.ts';

/** How /console/ is served: one page for every deep link, hashed assets cached for good, strict headers. */
const { dir, manifest } = await builtConsole(t);
const test = await buildTestApp(t, { plugins: pluginsWithConsole(dir) });

function hasStrictHeaders(t: Test, headers: Record<string, unknown>) {
  t.equal(headers['content-security-policy'], CONSOLE_CSP);
  t.equal(headers['x-content-type-options'], 'nosniff');
  t.equal(headers['referrer-policy'], 'no-referrer');
}

t.test('/console/ answers the page: its hashed script and stylesheet, no inline script, not cached', async (t) => {
  const response = await test.app.inject({ method: 'GET', url: '/console/' });
  t.equal(response.statusCode, 200);
  t.match(response.headers['content-type'], /^text\/html/);
  t.equal(response.headers['cache-control'], 'no-store');
  hasStrictHeaders(t, response.headers);
  t.match(response.body, `<script type="module" src="/console/assets/${manifest.script}"></script>`);
  t.match(response.body, `<link rel="stylesheet" href="/console/assets/${manifest.stylesheet}">`);
  const scripts = [...response.body.matchAll(/<script\b[^>]*>([\s\S]*?)<\/script>/g)];
  t.equal(scripts.length, 1, 'one script element');
  t.equal(scripts[0]![1], '', 'with no inline code');
  t.notMatch(response.body, /\son[a-z]+=|style=/i, 'no inline handlers or styles');
});

t.test('the CSP allows nothing from another origin and no framing', async (t) => {
  for (const directive of ["default-src 'self'", "script-src 'self'", "style-src 'self'", "connect-src 'self'", "frame-ancestors 'none'", "base-uri 'none'"]) {
    t.match(CONSOLE_CSP, directive);
  }
  t.notMatch(CONSOLE_CSP, /unsafe-inline|unsafe-eval|https?:|\*/);
});

t.test('every deep link under /console/ answers the same page', async (t) => {
  const page = (await test.app.inject({ method: 'GET', url: '/console/' })).body;
  for (const url of [
    '/console',
    '/console/keys',
    '/console/keys/0b5d3b7c-1f7e-4a59-9a44-0f6c1cf5e0a1',
    '/console/usage?granularity=hour',
    '/console/sign-in?next=%2Fconsole%2Fkeys',
    '/console/no/such/page',
  ]) {
    const response = await test.app.inject({ method: 'GET', url });
    t.equal(response.statusCode, 200, url);
    t.equal(response.body, page, url);
    t.equal(response.headers['cache-control'], 'no-store', url);
  }
});

t.test('the hashed assets are cached for a year and immutable, with their types', async (t) => {
  const script = await test.app.inject({ method: 'GET', url: `/console/assets/${manifest.script}` });
  t.equal(script.statusCode, 200);
  t.equal(script.headers['cache-control'], 'public, max-age=31536000, immutable');
  t.match(script.headers['content-type'], /^text\/javascript/);
  t.equal(script.headers['x-content-type-options'], 'nosniff');
  t.ok(script.body.length > 1000);
  const stylesheet = await test.app.inject({ method: 'GET', url: `/console/assets/${manifest.stylesheet}` });
  t.equal(stylesheet.statusCode, 200);
  t.match(stylesheet.headers['content-type'], /^text\/css/);
  t.equal(stylesheet.headers['cache-control'], 'public, max-age=31536000, immutable');
});

t.test('an asset is sent gzipped to a client that accepts it, with the same bytes, and 304 for a current copy', async (t) => {
  const url = `/console/assets/${manifest.script}`;
  const plain = await test.app.inject({ method: 'GET', url });
  const zipped = await test.app.inject({ method: 'GET', url, headers: { 'accept-encoding': 'br, gzip;q=0.8' } });
  t.equal(zipped.headers['content-encoding'], 'gzip');
  t.equal(zipped.headers.vary, 'accept-encoding');
  t.ok(zipped.rawPayload.length < plain.rawPayload.length / 2, 'smaller');
  t.same(gunzipSync(zipped.rawPayload), plain.rawPayload, 'the same script');
  t.equal(plain.headers['content-encoding'], undefined, 'identity when gzip is not accepted');
  const refused = await test.app.inject({ method: 'GET', url, headers: { 'accept-encoding': 'gzip;q=0' } });
  t.equal(refused.headers['content-encoding'], undefined, 'identity when gzip is refused');
  const current = await test.app.inject({ method: 'GET', url, headers: { 'if-none-match': plain.headers.etag as string } });
  t.equal(current.statusCode, 304);
  t.equal(current.body, '');
});

t.test('an asset that is not this build’s answers 404, not cached, and nothing outside the build is reachable', async (t) => {
  for (const url of ['/console/assets/AAAAAAAA.js', '/console/assets/..%2Fmanifest.json', '/console/assets/manifest.json', `/console/assets/${manifest.script}.map`]) {
    const response = await test.app.inject({ method: 'GET', url });
    t.equal(response.statusCode, 404, url);
    t.equal(response.headers['cache-control'], 'no-store', url);
  }
});

t.test('the service root advertises the console', async (t) => {
  const response = await test.app.inject({ method: 'GET', url: '/' });
  t.equal(response.json().surfaces.console, '/console/');
});

t.test('without a build the page answers 503 naming the command that makes it', async (t) => {
  const empty = await builtConsoleMissing(t);
  const response = await empty.app.inject({ method: 'GET', url: '/console/keys' });
  t.equal(response.statusCode, 503);
  t.match(response.body, 'npm run build');
  t.equal(response.headers['content-security-policy'], CONSOLE_CSP);
});

t.test('a console that is off serves nothing at /console/', async (t) => {
  for (const plugins of [
    { ...allPlugins(), console: { enabled: false, dir } },
    { ...allPlugins(), console: false },
  ]) {
    const off = await buildTestApp(t, { plugins });
    t.equal((await off.app.inject({ method: 'GET', url: '/console/' })).statusCode, 404);
    t.notOk((await off.app.inject({ method: 'GET', url: '/' })).json().surfaces.console);
  }
});

async function builtConsoleMissing(t: Test) {
  return buildTestApp(t, { plugins: { ...allPlugins(), console: { dir: `${dir}/not-built` } } });
}
