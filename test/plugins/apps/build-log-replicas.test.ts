import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { generateToken, SESSION_PREFIX } from '../../../core/identity/api-tokens.ts';
import { Tokens } from '../../../core/kernel/di-tokens.ts';
import { buildTestApp, createKey, realServersConfig, type TestApp } from '../../helpers/app.ts';
import { git, settledDeployment, tinyApp } from './apps-fixtures.ts';

/**
 * A running build's log is read from any replica (core/jobs/job-logs.ts): the build runs on a
 * worker (role `all`), the API answering is another process (role `api`) with a build directory of
 * its own, so it can only have the lines from the database. The build prints a line, then waits
 * for a file the test writes once the other replica has streamed that line.
 */
t.setTimeout(300_000);

const servers = realServersConfig();

const SERVER = `const http = require('node:http');
http.createServer((q, s) => s.end('ok')).listen(Number(process.env.PORT), '127.0.0.1');
`;

interface ServerSentEvent {
  event: string;
  data: Record<string, unknown>;
}

/** Follows `url` on `test`'s HTTP server, `onEvent` as each event arrives; resolves with them all at the end. */
function follow(test: TestApp, url: string, token: string, onEvent: (event: ServerSentEvent) => void) {
  const { port } = test.app.server.address() as AddressInfo;
  const headers = { authorization: `Bearer ${token}` };
  return new Promise<ServerSentEvent[]>((resolve, reject) => {
    const events: ServerSentEvent[] = [];
    const request = http.get(`http://127.0.0.1:${port}${url}`, { headers }, (response) => {
      response.setEncoding('utf8');
      let buffered = '';
      response.on('data', (chunk: string) => {
        buffered += chunk;
        let end = buffered.indexOf('\n\n');
        while (end !== -1) {
          const block = buffered.slice(0, end);
          buffered = buffered.slice(end + 2);
          end = buffered.indexOf('\n\n');
          const event = /^event: (.*)$/m.exec(block)?.[1];
          const data = /^data: (.*)$/m.exec(block)?.[1];
          if (!event) continue;
          const parsed = { event, data: data ? (JSON.parse(data) as Record<string, unknown>) : {} };
          events.push(parsed);
          onEvent(parsed);
        }
      });
      response.on('end', () => resolve(events));
      response.on('error', reject);
    });
    request.on('error', reject);
  });
}

const skip = servers ? false : 'needs TEST_PG_URL and TEST_REDIS_URL';

t.test('a build running on one replica has its log read and followed on another', { skip }, async (t) => {
  t.teardown(() => servers!.dropSchema());
  const ownerToken = generateToken(SESSION_PREFIX);
  // The repositories are on a volume both replicas see (the git host's `local.dir`), as in production.
  const gitDir = mkdtempSync(join(tmpdir(), 'svc-git-'));
  t.teardown(() => rmSync(gitDir, { recursive: true, force: true }));
  const replica = async (role: 'all' | 'api') => {
    const buildDir = mkdtempSync(join(tmpdir(), `svc-apps-${role}-`));
    t.teardown(() => rmSync(buildDir, { recursive: true, force: true }));
    const test = await buildTestApp(t, {
      config: {
        server: { role },
        // Blobs in the database: the finished log is read by either replica.
        storage: { ...servers!.storage, blobs: { driver: 'database' } },
        secrets: servers!.secrets,
        bootstrap: { ownerToken },
      },
      plugins: {
        keys: {},
        projects: {},
        githost: { local: { dir: gitDir } },
        apps: {
          proxy: { port: 0 },
          runtime: { healthTimeoutMs: 15_000, stopGraceMs: 2_000 },
          build: { dir: buildDir, timeoutMs: 120_000 },
        },
      },
    });
    await test.app.listen({ host: '127.0.0.1', port: 0 });
    return { test, buildDir };
  };
  const worker = await replica('all');
  const api = await replica('api');
  const organizationId = worker.test.organizationId;
  const deployKey = (await createKey(worker.test, { scopes: ['apps:deploy', 'apps:read'] })).key;
  const readKey = (await createKey(api.test, { scopes: ['apps:read'] })).key;

  t.equal((await worker.test.call('POST', '/client/githost/repos', { body: { name: 'waits' } })).statusCode, 201);
  const work = await tinyApp(t, {
    'package.json': '{"name":"waits","scripts":{"build":"sh wait.sh","start":"node server.js"}}\n',
    'wait.sh': 'echo halfway\nwhile [ ! -e go ]; do sleep 0.05; done\necho finishing\n',
    'server.js': SERVER,
  });
  const { port } = worker.test.app.server.address() as AddressInfo;
  const remote = `http://127.0.0.1:${port}/git/${organizationId}/waits.git`;
  await git(t, work.dir, ['push', '--quiet', remote, 'main'], deployKey);
  // Asked of the API replica; the job runs on the worker, the only one that takes jobs.
  const created = await api.test.call('POST', '/client/apps/githost', { body: { repo: 'waits' } });
  t.equal(created.statusCode, 202, created.body);
  const { app, deployment } = created.json() as { app: { id: string }; deployment: { id: string } };
  const logsUrl = `/client/deployments/${deployment.id}/logs`;

  let released = false;
  let whileRunning: { complete: boolean; lines: string[] } | null = null;
  let release: Promise<void> = Promise.resolve();
  const events = await follow(api.test, `${logsUrl}?follow=1`, readKey, (event) => {
    const seen = event.event === 'snapshot' ? (event.data['lines'] as string[]) : [String(event.data['line'])];
    if (released || !seen.some((line) => line.endsWith('stdout halfway'))) return;
    released = true;
    // The build waits for this file: the line came from the worker while it was still building.
    release = (async () => {
      whileRunning = (await api.test.call('GET', logsUrl, { token: readKey })).json();
      writeFileSync(join(worker.buildDir, 'builds', deployment.id, 'src', 'go'), '');
    })();
  });
  await release;

  t.ok(released, 'the API replica streamed the line the build printed while it waited');
  t.match(whileRunning, { complete: false }, 'read on the API replica while the build ran');
  t.ok(whileRunning!.lines.some((line) => line.endsWith('stdout halfway')));
  t.equal(events[0]?.event, 'snapshot');
  t.equal(events.at(-1)?.event, 'end');
  const lineEvents = events.filter((event) => event.event === 'line').map((event) => String(event.data['line']));
  const finishing = lineEvents.findIndex((line) => line.endsWith('stdout finishing'));
  t.ok(finishing >= 0, 'a line printed after the file was written is streamed');

  const settled = await settledDeployment(api.test, app.id);
  t.equal(settled.status, 'live', settled.failureReason ?? '');
  const storedAnswer = await api.test.call('GET', logsUrl, { token: readKey });
  const stored: { complete: boolean; lines: string[] } = storedAnswer.json();
  t.equal(stored.complete, true);
  const followed = [...((events[0]!.data['lines'] as string[]) ?? []), ...lineEvents];
  t.same(followed, stored.lines, 'the follower got the stored log, each line once, in order');

  const db = api.test.app.svc.container.resolve(Tokens.Database);
  const count = 'SELECT count(*)::int AS n FROM job_log_chunks WHERE stream = $1';
  const { rows } = await db.query<{ n: number }>(count, [`apps.build:${deployment.id}`]);
  t.equal(rows[0]?.n, 0, 'the running log is deleted once the blob holds it');
  t.notOk(existsSync(join(worker.buildDir, 'logs')), 'no log file on the worker’s disk');
  t.notOk(existsSync(join(api.buildDir, 'builds')), 'nothing was built on the API replica');
});
