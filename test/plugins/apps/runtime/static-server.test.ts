import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import http from 'node:http';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import t from 'tap';
import type { TapLike } from '../../../helpers/app.ts';

/**
 * The static file server the runtime runs for static sites, as it runs there: the system's node on
 * the script, PORT in its env, a folder as its root. Each rule of plugins/apps/runtime/README.md
 * ("Static sites") is asked over real HTTP, raw paths included (the client sends them unnormalised).
 */
const SCRIPT = fileURLToPath(new URL('../../../../plugins/apps/runtime/static-server.mjs', import.meta.url));
const SECRET = 'outside-the-root-7d1f0c';

interface Answer {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: string;
}

async function site(t: TapLike, files: Record<string, string>): Promise<string> {
  const top = await mkdtemp(path.join(tmpdir(), 'static-server-'));
  t.teardown(() => rm(top, { recursive: true, force: true }));
  // Beside the root, never below it: what an escape would reach.
  await writeFile(path.join(top, 'secret.txt'), SECRET);
  await mkdir(path.join(top, 'private'));
  await writeFile(path.join(top, 'private', 'index.html'), SECRET);
  const root = path.join(top, 'site');
  for (const [name, content] of Object.entries(files)) {
    await mkdir(path.dirname(path.join(root, name)), { recursive: true });
    await writeFile(path.join(root, name), content);
  }
  return root;
}

type Get = (path: string, options?: { method?: string; headers?: Record<string, string> }) => Promise<Answer>;

/** The server on a folder, as the runtime starts it (the test runner's NODE_OPTIONS dropped, as the sandbox does). */
function start(root: string, args: string[]): ChildProcess {
  const { NODE_OPTIONS: _, ...env } = process.env;
  const options = { env: { ...env, PORT: '0' }, stdio: ['ignore', 'pipe', 'pipe'] as ['ignore', 'pipe', 'pipe'] };
  return spawn(process.execPath, [SCRIPT, '--root', root, ...args], options);
}

async function serve(t: TapLike, root: string, args: string[] = []): Promise<Get> {
  const child = start(root, args);
  t.teardown(() => {
    child.kill('SIGKILL');
  });
  const [line] = (await once(child.stdout!, 'data')) as [Buffer];
  const port = Number(/:(\d+)\n/.exec(line.toString())![1]);
  return (requestPath, options = {}) =>
    new Promise((resolve, reject) => {
      const { method = 'GET', headers = {} } = options;
      const target = { host: '127.0.0.1', port, path: requestPath, method, headers };
      const req = http.request(target, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('end', () => {
          resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks).toString('utf8') });
        });
      });
      req.on('error', reject);
      req.end();
    });
}

const JS = 'text/javascript; charset=utf-8';
const HTML = 'text/html; charset=utf-8';

const FILES = {
  'index.html': '<h1>home</h1>',
  'about/index.html': '<h1>about</h1>',
  'css/site.css': 'body{}',
  'js/app.js': 'console.log(1)',
  'img/logo.svg': '<svg/>',
  'img/photo.png': 'png',
  'data/info.json': '{}',
  'fonts/a.woff2': 'font',
  'blob.xyz': 'raw',
  '.env': 'TOKEN=hidden-dotfile',
  '.well-known/security.txt': 'Contact: x',
};

t.test('files: index.html for a folder, types by extension, a folder without its slash redirected', async (t) => {
  const get = await serve(t, await site(t, FILES));
  const home = await get('/');
  t.same([home.status, home.body, home.headers['content-type']], [200, '<h1>home</h1>', 'text/html; charset=utf-8']);
  t.equal((await get('/about/')).body, '<h1>about</h1>');
  t.equal((await get('/index.html?x=1')).body, '<h1>home</h1>', 'the query is not part of the path');
  const redirect = await get('/about?tab=2');
  t.same([redirect.status, redirect.headers.location], [301, '/about/?tab=2']);
  const types: Record<string, string> = {
    '/css/site.css': 'text/css; charset=utf-8',
    '/js/app.js': 'text/javascript; charset=utf-8',
    '/img/logo.svg': 'image/svg+xml',
    '/img/photo.png': 'image/png',
    '/data/info.json': 'application/json; charset=utf-8',
    '/fonts/a.woff2': 'font/woff2',
    '/blob.xyz': 'application/octet-stream',
  };
  for (const [file, type] of Object.entries(types)) {
    const answer = await get(file);
    const { status, headers } = answer;
    t.same([status, headers['content-type'], headers['x-content-type-options']], [200, type, 'nosniff'], file);
  }
  t.equal((await get('/.well-known/security.txt')).status, 200, '.well-known is served');
});

t.test('ETag and Last-Modified: a matching If-None-Match or a later If-Modified-Since is a 304', async (t) => {
  const get = await serve(t, await site(t, FILES));
  const first = await get('/css/site.css');
  const etag = first.headers.etag!;
  t.match(etag, /^W\/"[0-9a-f]+-[0-9a-f]+"$/);
  const lastModified = first.headers['last-modified']!;
  t.ok(!Number.isNaN(Date.parse(lastModified)), 'Last-Modified is a date');
  const status = async (headers: Record<string, string>) => (await get('/css/site.css', { headers })).status;
  const cached = await get('/css/site.css', { headers: { 'if-none-match': etag } });
  t.same([cached.status, cached.body, cached.headers.etag], [304, '', etag]);
  t.equal(await status({ 'if-none-match': `"other", ${etag}` }), 304, 'one of a list');
  t.equal(await status({ 'if-none-match': '"other"' }), 200);
  t.equal(await status({ 'if-modified-since': lastModified }), 304);
  t.equal(await status({ 'if-modified-since': new Date(0).toUTCString() }), 200, 'changed since then');
  const both = { 'if-none-match': '"other"', 'if-modified-since': lastModified };
  t.equal(await status(both), 200, 'If-None-Match decides when both are sent');
});

t.test('HEAD answers the headers with no body; other methods 405 with Allow', async (t) => {
  const get = await serve(t, await site(t, FILES));
  const head = await get('/js/app.js', { method: 'HEAD' });
  const length = String('console.log(1)'.length);
  t.same([head.status, head.body, head.headers['content-length'], head.headers['content-type']], [200, '', length, JS]);
  const post = await get('/', { method: 'POST' });
  t.same([post.status, post.headers.allow], [405, 'GET, HEAD']);
  t.equal((await get('/nope', { method: 'HEAD' })).status, 404);
});

t.test('a missing file is a 404 with a small page; a folder without index.html too (no listing)', async (t) => {
  const get = await serve(t, await site(t, { ...FILES, 'empty/readme.txt': 'x' }));
  const missing = await get('/no/such/page');
  t.same([missing.status, missing.headers['content-type']], [404, 'text/html; charset=utf-8']);
  t.match(missing.body, /404 Not Found/);
  t.equal((await get('/empty/')).status, 404);
});

t.test('nothing outside the root is served: .., encoded .., encoded slashes, NUL, dotfiles, symlinks', async (t) => {
  const root = await site(t, FILES);
  await symlink(path.join(root, '..', 'secret.txt'), path.join(root, 'link-out.txt'));
  await symlink(path.join(root, '..', 'private'), path.join(root, 'dir-out'));
  await symlink(path.join(root, 'css', 'site.css'), path.join(root, 'link-in.css'));
  const get = await serve(t, root);
  const attempts = [
    '/../secret.txt',
    '/css/../../secret.txt',
    '/%2e%2e/secret.txt',
    '/%2E%2E/secret.txt',
    '/..%2fsecret.txt',
    '/%2e%2e%2fsecret.txt',
    '/css/%2e%2e%2f%2e%2e%2fsecret.txt',
    '/..%5csecret.txt',
    '/../private/',
    '/link-out.txt',
    '/dir-out/',
    '/dir-out/index.html',
    '/.env',
    '/%2eenv',
    '/index.html%00.png',
    '/%00',
    '/%E0%A4%A',
    '//../secret.txt',
  ];
  for (const attempt of attempts) {
    const answer = await get(attempt);
    t.ok([400, 404].includes(answer.status), `${attempt}: ${answer.status}`);
    const leaked = answer.body.includes(SECRET) || answer.body.includes('hidden-dotfile');
    t.notOk(leaked, `${attempt}: nothing of the outside in the body`);
  }
  t.equal((await get('/link-in.css')).body, 'body{}', 'a symlink that stays inside the root is followed');
});

t.test('--spa answers a client route (no extension) with its file; --not-found replaces the 404 page', async (t) => {
  const root = await site(t, { ...FILES, '200.html': '<div id=app></div>', '404.html': '<h1>lost</h1>' });
  const spa = await serve(t, root, ['--spa', '200.html']);
  const route = await spa('/dashboard/users/7');
  t.same([route.status, route.body, route.headers['content-type']], [200, '<div id=app></div>', HTML]);
  t.equal((await spa('/js/missing.js')).status, 404, 'a missing asset stays a 404');
  t.equal((await spa('/about/')).body, '<h1>about</h1>', 'existing files come first');

  const custom = await serve(t, root, ['--not-found', '404.html']);
  const lost = await custom('/dashboard');
  t.same([lost.status, lost.body], [404, '<h1>lost</h1>']);
});

t.test('a fallback the root does not hold stops the server with a message, before it listens', async (t) => {
  const root = await site(t, FILES);
  const child = start(root, ['--spa', '200.html']);
  let stderr = '';
  child.stderr!.on('data', (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  const [code] = (await once(child, 'exit')) as [number];
  t.equal(code, 1);
  t.match(stderr, /200\.html is not a file in/);
});
