import { randomUUID } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import t, { type Test } from 'tap';
import { Tokens } from '../../../core/kernel/di-tokens.ts';
import { AppEnv } from '../../../plugins/apps/app-env.ts';
import { AppsTokens } from '../../../plugins/apps/index.ts';
import { appsServer, call, git, settledDeployment } from './apps-fixtures.ts';
import { type FakePackage, fakeRegistry } from './fake-npm-registry.ts';

/**
 * Static sites end to end: a repository of HTML and assets pushed to the git host deploys and
 * answers through the apps proxy, served by the runtime's static file server in the app's sandbox;
 * a front end whose build writes dist/ (here a build tool named vite, from a loopback registry) is
 * served from dist/ the same way. The decision, the deployment's log and the preview show them.
 */
t.setTimeout(600_000);

/** A build tool standing in for vite: `vite build` writes dist/ as vite does (index.html, assets/). */
const FAKE_VITE: FakePackage = {
  name: 'vite',
  version: '5.4.0',
  manifest: { bin: { vite: 'bin.js' } },
  files: {
    'bin.js': [
      '#!/usr/bin/env node',
      "const fs = require('node:fs');",
      "if (process.argv[2] !== 'build') process.exit(2);",
      "fs.mkdirSync('dist/assets', { recursive: true });",
      "const page = fs.readFileSync('index.html', 'utf8');",
      "fs.writeFileSync('dist/index.html', page.replace('/src/main.js', '/assets/main.js'));",
      "fs.copyFileSync('src/main.js', 'dist/assets/main.js');",
      '',
    ].join('\n'),
  },
};

async function server(t: Test) {
  const registry = await fakeRegistry(t, [FAKE_VITE]);
  const { test, orgUrl, deployKey } = await appsServer(t, {
    config: { outbound: { allowPrivateNetwork: true } },
    build: { registries: [registry.url], npmRegistry: registry.url },
  });
  /** A repository of exactly these files, pushed and deployed; answers the app and its proxy's port. */
  const deploy = async (name: string, files: Record<string, string>, env: Record<string, string> = {}) => {
    t.equal((await test.call('POST', '/client/githost/repos', { body: { name } })).statusCode, 201);
    const dir = mkdtempSync(join(tmpdir(), 'static-site-'));
    t.teardown(() => rmSync(dir, { recursive: true, force: true }));
    await git(t, dir, ['init', '--quiet', '--initial-branch=main']);
    for (const [file, content] of Object.entries(files)) {
      mkdirSync(dirname(join(dir, file)), { recursive: true });
      writeFileSync(join(dir, file), content);
    }
    await git(t, dir, ['add', '.']);
    await git(t, dir, ['commit', '--quiet', '-m', name]);
    const repoUrl = `${orgUrl}/${name}.git`;
    await git(t, dir, ['push', '--quiet', repoUrl, 'main'], deployKey);
    const response = await test.call('POST', '/client/apps/githost', { body: { repo: name, env } });
    t.equal(response.statusCode, 202, response.body);
    const body = response.json() as { app: { id: string; url: string }; service: { id: string } };
    return { appId: body.app.id, serviceId: body.service.id, proxyPort: Number(new URL(body.app.url).port) };
  };
  return { test, deploy };
}

/** A front end's package.json: its build script, and vite as its one dependency. */
const packageJson = (name: string, build: string) => {
  return `${JSON.stringify({ name, private: true, scripts: { build }, devDependencies: { vite: '^5.4.0' } })}\n`;
};

const SITE = {
  'index.html': '<!doctype html><title>Static Hello</title><link rel="stylesheet" href="css/site.css"><h1>Hello</h1>\n',
  'css/site.css': 'h1 { color: teal; }\n',
  'js/app.js': "console.log('hello');\n",
  'img/logo.svg': '<svg xmlns="http://www.w3.org/2000/svg"/>\n',
  'about/index.html': '<!doctype html><title>About</title>\n',
  '404.html': '<!doctype html><title>Lost</title><p>No such page on this site.</p>\n',
  '.env': 'SECRET=committed-by-mistake\n',
};

t.test('a static site deploys, and the static file server answers through the apps proxy', async (t) => {
  const { test, deploy } = await server(t);
  const known = `known-${randomUUID()}`;
  const { appId, serviceId, proxyPort } = await deploy('site', SITE, { SITE_TOKEN: known });
  const deployment = await settledDeployment(test, appId);
  t.equal(deployment.status, 'live', deployment.failureReason ?? '');
  const get = (path: string, headers: Record<string, string> = {}, method = 'GET') => {
    return call(proxyPort, 'site.localhost', { path, headers, method });
  };

  const home = await get('/');
  t.same([home.status, home.headers['content-type']], [200, 'text/html; charset=utf-8']);
  t.match(home.body, /<title>Static Hello<\/title>/);
  const css = await get('/css/site.css');
  t.same([css.status, css.headers['content-type'], css.body], [200, 'text/css; charset=utf-8', SITE['css/site.css']]);
  t.equal((await get('/img/logo.svg')).headers['content-type'], 'image/svg+xml');
  t.equal((await get('/js/app.js')).headers['content-type'], 'text/javascript; charset=utf-8');
  t.equal((await get('/about/')).body, SITE['about/index.html']);
  const revalidated = await get('/css/site.css', { 'if-none-match': css.headers.etag as string });
  t.equal(revalidated.status, 304, 'the ETag revalidates through the proxy');
  const head = await get('/css/site.css', {}, 'HEAD');
  t.same([head.status, head.body, head.headers['content-length']], [200, '', String(SITE['css/site.css'].length)]);
  const lost = await get('/no/such/page');
  t.same([lost.status, lost.body], [404, SITE['404.html']], "the site's 404.html, with status 404");
  t.equal((await get('/.env')).status, 404, 'a committed dotfile is not served');
  t.equal((await get('/../static-server.mjs')).status, 404, 'nor the server beside the site');

  const build = (await test.call('GET', `/client/services/${serviceId}/build`)).json();
  const start = { value: null, rule: 'static_file_server' };
  const decided = { provider: 'static', start, staticRoot: { value: '.' } };
  t.match(build, { object: 'build_decision', decision: decided });
  const log = (await test.call('GET', `/client/deployments/${deployment.id}/logs`)).json() as { lines: string[] };
  const args = '--root site --host 127.0.0.1 --not-found 404.html';
  t.ok(
    log.lines.some((line) => line.endsWith(`build starting: exec node static-server.mjs ${args}`)),
    'the log names the command that serves it',
  );
  const preview = await test.call('GET', `/client/apps/${appId}/preview`);
  const page = { status: 200, title: 'Static Hello' };
  t.match(preview.json(), { object: 'app_preview', status: 'live', page, error: null });
  const app = (await test.call('GET', `/client/apps/${appId}`)).json();
  t.match(app, { status: 'live', services: [{ id: serviceId, state: 'running', liveDeploymentId: deployment.id }] });

  // The runtime's state file, as the apps plugin writes it: its env values are sealed with the vault's keys.
  const gatewayKey = await new AppEnv(test.app.svc.container.resolve(Tokens.Secrets)).gatewayKey(serviceId);
  t.ok(gatewayKey?.token, 'the app has its own gateway key (SVC_API_KEY)');
  const stateDir = test.app.svc.container.resolve(AppsTokens.Host).stateDir;
  const state = await readFile(join(stateDir, 'runtime-state.json'), 'utf8');
  t.match(state, serviceId, 'the service is recorded');
  t.notOk(state.includes(known), 'the variable given at deploy is not in the file');
  t.notOk(state.includes(gatewayKey!.token), 'nor SVC_API_KEY');
});

t.test("a front end's build output, dist/, is served, with the build's 200.html for client routes", async (t) => {
  const { test, deploy } = await server(t);
  const { appId, serviceId, proxyPort } = await deploy('front', {
    'package.json': packageJson('front', 'vite build && cp dist/index.html dist/200.html'),
    'index.html': '<!doctype html><title>Front</title><div id="app"></div><script src="/src/main.js"></script>\n',
    'src/main.js': "document.querySelector('#app').textContent = 'built';\n",
  });
  const deployment = await settledDeployment(test, appId);
  t.equal(deployment.status, 'live', deployment.failureReason ?? '');
  const get = (path: string) => call(proxyPort, 'front.localhost', { path });

  const home = await get('/');
  t.equal(home.status, 200);
  t.match(home.body, /src="\/assets\/main\.js"/, 'the built index.html, not the source one');
  const script = await get('/assets/main.js');
  t.same([script.status, script.headers['content-type']], [200, 'text/javascript; charset=utf-8']);
  t.equal((await get('/src/main.js')).status, 404, 'the sources are not served: only dist/ is');
  t.equal((await get('/package.json')).status, 404);
  const route = await get('/settings/profile');
  t.same([route.status, route.body], [200, home.body], 'a client route answers with 200.html');
  t.equal((await get('/assets/missing.js')).status, 404, 'a missing asset stays a 404');

  const build = (await test.call('GET', `/client/services/${serviceId}/build`)).json();
  const start = { value: null, rule: 'static_build_output' };
  t.match(build.decision, { provider: 'node', framework: { value: 'vite' }, start, staticRoot: { value: 'dist' } });
});

t.test('a build that writes no dist/ fails with a reason naming the folder', async (t) => {
  const { test, deploy } = await server(t);
  const { appId } = await deploy('nodist', {
    'package.json': packageJson('nodist', 'vite build && rm -r dist'),
    'index.html': '<!doctype html><title>x</title>\n',
    'src/main.js': '\n',
  });
  const deployment = await settledDeployment(test, appId);
  t.equal(deployment.status, 'failed');
  t.equal(deployment.failureCode, 'build_failed');
  t.match(deployment.failureReason, /there is no dist\/ folder to serve after the build/);
});
