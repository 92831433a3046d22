import { createHash } from 'node:crypto';
import { execFileSync } from 'node:child_process';
import { readdirSync, statSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import t, { type Test } from 'tap';
import { createKey } from '../../helpers/app.ts';
import { appsServer, call, git, settledDeployment, tinyApp } from './apps-fixtures.ts';
import { fakeRegistry } from './fake-npm-registry.ts';

/**
 * Builds run with no network but the registry proxy: a dependency comes from the configured
 * (loopback, fake) npm registry through it; anything else is refused and the log says why. Over the
 * time limit a build is `build_timeout`, over the memory cap `build_memory`; a fork bomb is held by
 * the process cap and the machine goes on.
 */
t.setTimeout(1_500_000);

const bwrapWorks = (() => {
  try {
    execFileSync('/usr/bin/bwrap', ['--ro-bind', '/', '/', '--unshare-net', '--', '/bin/true']);
    return true;
  } catch {
    return false;
  }
})();

async function buildServer(t: Test, registryUrl: string, build: Record<string, unknown> = {}) {
  const { test, orgUrl, deployKey, buildDir } = await appsServer(t, {
    config: { outbound: { allowPrivateNetwork: true } },
    build: { registries: [registryUrl], npmRegistry: registryUrl, ...build },
  });
  const deploy = async (name: string, files: Record<string, string>) => {
    t.equal((await test.call('POST', '/client/githost/repos', { body: { name } })).statusCode, 201);
    const work = await tinyApp(t, files);
    await git(t, work.dir, ['push', '--quiet', `${orgUrl}/${name}.git`, 'main'], deployKey);
    const response = await test.call('POST', '/client/apps/githost', { body: { repo: name } });
    t.equal(response.statusCode, 202, response.body);
    return response.json() as { app: { id: string; url: string }; service: { id: string }; deployment: { id: string } };
  };
  return { test, buildDir, deploy };
}

const server = (main: string) => ({
  'server.js': `const http = require('node:http');\n${main}\nhttp.createServer((q, s) => s.end(String(answer))).listen(Number(process.env.PORT), '127.0.0.1');\n`,
});

t.test('builds in the registries-only sandbox', { skip: bwrapWorks ? false : 'bwrap --unshare-net does not work here' }, async (t) => {
  const registry = await fakeRegistry(t);
  const { test, deploy, buildDir } = await buildServer(t, registry.url, { timeoutMs: 20_000, memoryBytes: 1536 * 1024 * 1024, processes: 64 });
  const log = async (id: string) => ((await test.call('GET', `/client/deployments/${id}/logs`)).json() as { lines: string[] }).lines.join('\n');

  await t.test('a dependency is installed from the configured registry through the proxy, and the app serves it', async (t) => {
    const { app } = await deploy('with-dep', {
      'package.json': '{"name":"with-dep","dependencies":{"tiny-dep":"1.0.0"},"scripts":{"start":"node server.js"}}\n',
      ...server("const answer = require('tiny-dep');"),
    });
    const deployment = await settledDeployment(test, app.id);
    t.equal(deployment.status, 'live', `${deployment.failureReason}\n${await log(deployment.id)}`);
    t.ok(registry.requests.includes('GET /tiny-dep'), 'the packument was asked for');
    t.ok(registry.requests.includes('GET /tiny-dep/-/tiny-dep-1.0.0.tgz'), 'the tarball was fetched');
    const answer = await call(Number(new URL(app.url).port), 'with-dep.localhost');
    t.same([answer.status, answer.body], [200, 'from tiny-dep']);
  });

  await t.test('a build reaching anything but a registry fails: the proxy refuses the CONNECT and the log says why', async (t) => {
    const reach = [
      "const http = require('node:http'); const net = require('node:net');",
      // Straight out: there is no network but the sandbox's own loopback.
      "const direct = net.connect(443, '1.1.1.1'); direct.on('connect', () => { console.log('DIRECT CONNECTED'); process.exit(0); });",
      "direct.on('error', (e) => { console.log('direct: ' + e.code);",
      "  const req = http.request({ host: '127.0.0.1', port: 3128, method: 'CONNECT', path: 'example.com:443' });",
      "  req.on('connect', (res) => { console.log('proxy answered ' + res.statusCode); process.exit(res.statusCode === 200 ? 0 : 1); });",
      "  req.on('error', (e) => { console.log('proxy: ' + e.message); process.exit(1); }); req.end(); });",
    ].join('\n');
    const { app } = await deploy('reach-out', {
      'package.json': '{"name":"reach-out","scripts":{"build":"node reach.js","start":"node server.js"}}\n',
      'reach.js': reach,
      ...server("const answer = 'never';"),
    });
    const deployment = await settledDeployment(test, app.id);
    t.equal(deployment.status, 'failed');
    t.match(deployment, { failureCode: 'build_failed' });
    const text = await log(deployment.id);
    t.match(text, /proxy refused CONNECT to example\.com:443: not a configured registry/);
    t.match(text, /direct: E(NETUNREACH|HOSTUNREACH|CONNREFUSED)/, 'a direct connection finds no network');
    t.notMatch(text, /DIRECT CONNECTED/);
    t.match(text, /proxy answered 403/);
  });

  await t.test('a build past the time limit fails with build_timeout', async (t) => {
    const { app } = await deploy('slow-build', {
      'package.json': '{"name":"slow-build","scripts":{"build":"sleep 120","start":"node server.js"}}\n',
      ...server("const answer = 'never';"),
    });
    const deployment = await settledDeployment(test, app.id);
    t.match(deployment, { status: 'failed', failureCode: 'build_timeout' });
    t.match(deployment.failureReason, /did not finish within \d+s \(build timeout\)/);
  });

  await t.test('a build over the memory cap fails with build_memory', async (t) => {
    const { app } = await deploy('hungry-build', {
      'package.json': '{"name":"hungry-build","scripts":{"build":"node hungry.js","start":"node server.js"}}\n',
      'hungry.js': 'const kept = []; for (;;) kept.push(Buffer.allocUnsafe(256 * 1024 * 1024));\n',
      ...server("const answer = 'never';"),
    });
    const deployment = await settledDeployment(test, app.id);
    t.match(deployment, { status: 'failed', failureCode: 'build_memory' }, await log(deployment.id));
    t.match(deployment.failureReason, /ran out of memory under the build's 1536 MiB cap/);
  });

  await t.test('a fork bomb is held by the process cap: the build fails, nothing of it is left, the machine goes on', async (t) => {
    const { app } = await deploy('fork-bomb', {
      'package.json': '{"name":"fork-bomb","scripts":{"build":"sh bomb.sh","start":"node server.js"}}\n',
      // Forks forever: whatever the cap refuses, it goes on trying until the build's time is up.
      'bomb.sh': 'bomb() { bomb | bomb & }\nwhile :; do bomb; done\n',
      ...server("const answer = 'never';"),
    });
    const deployment = await settledDeployment(test, app.id);
    // The build's own shell may meet the cap first and exit (build_failed), or go on refused until the build's
    // time is up (build_timeout): which comes first is the scheduler's; either way the build failed, contained.
    t.equal(deployment.status, 'failed');
    t.ok(['build_failed', 'build_timeout'].includes(String(deployment.failureCode)), `failure code ${deployment.failureCode}`);
    t.match(await log(deployment.id), /fork|Resource temporarily unavailable|Cannot/i, 'forks were refused');
    const uid = 200_000 + (createHash('sha256').update(deployment.id).digest().readUInt32BE(0) % 1000);
    const left = readdirSync('/proc').filter((pid) => /^\d+$/.test(pid) && statOwner(pid) === uid);
    t.same(left, [], 'no process of the build uid is left');
    t.equal(execFileSync('/bin/sh', ['-c', 'echo alive']).toString().trim(), 'alive');
  });

  await t.test('a running build’s log is read while it runs, and followed until the deployment ends', async (t) => {
    const { app, deployment } = await deploy('wait-build', {
      'package.json': '{"name":"wait-build","scripts":{"build":"sh wait.sh","start":"node server.js"}}\n',
      'wait.sh': 'echo halfway\nwhile [ ! -e go ]; do sleep 0.05; done\necho finishing\n',
      ...server("const answer = 'waited';"),
    });
    let running = { complete: true, lines: [] as string[] };
    for (let tries = 0; tries < 600 && !running.lines.some((line) => line.endsWith('stdout halfway')); tries++) {
      running = (await test.call('GET', `/client/deployments/${deployment.id}/logs`)).json();
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    t.equal(running.complete, false, 'the deployment is still running');
    t.ok(
      running.lines.some((line) => line.endsWith('stdout halfway')),
      'the lines so far',
    );

    const { port } = test.app.server.address() as AddressInfo;
    const key = (await createKey(test, { scopes: ['apps:read'] })).key;
    const events: string[] = [];
    const followed = new Promise<void>((resolve, reject) => {
      const request = http.get(`http://127.0.0.1:${port}/client/deployments/${deployment.id}/logs?follow=1`, { headers: { authorization: `Bearer ${key}` } }, (response) => {
        t.match(response.headers['content-type'], /text\/event-stream/);
        response.setEncoding('utf8');
        let text = '';
        response.on('data', (chunk: string) => {
          text += chunk;
          if (text.includes('event: snapshot')) {
            // Seen the snapshot: now the build may finish.
            const src = join(buildDir, 'builds', deployment.id, 'src', 'go');
            try {
              writeFileSync(src, '');
            } catch {}
          }
        });
        response.on('end', () => {
          events.push(...text.split('\n\n').filter(Boolean));
          resolve();
        });
      });
      request.on('error', reject);
    });
    await followed;
    t.match(events[0], /^event: snapshot\ndata: \{"object":"build_log"/);
    t.ok(
      events.some((event) => /^event: line\ndata: .*stdout finishing/.test(event)),
      'a line printed after the snapshot is streamed',
    );
    t.match(events.at(-1), /^event: end/);
    const settled = await settledDeployment(test, app.id);
    t.equal(settled.status, 'live');
    const stored = (await test.call('GET', `/client/deployments/${deployment.id}/logs`)).json();
    t.equal(stored.complete, true);
  });
});

function statOwner(pid: string): number | null {
  try {
    return statSync(`/proc/${pid}`).uid;
  } catch {
    return null;
  }
}
