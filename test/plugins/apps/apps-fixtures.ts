import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import type { Test } from 'tap';
import { randomUUID } from 'node:crypto';
import { Tokens } from '../../../core/kernel/di-tokens.ts';
import { AppsStore } from '../../../plugins/apps/apps-store.ts';
import { AppsTokens } from '../../../plugins/apps/index.ts';
import { buildTestApp, createKey, type TestApp, type TestAppOptions } from '../../helpers/app.ts';
import { git } from '../githost/git-fixtures.ts';

export { call } from './proxy/proxy-fixtures.ts';
export { git, tinyApp } from '../githost/git-fixtures.ts';

export interface AppsServer {
  test: TestApp;
  orgUrl: string;
  deployKey: string;
  /** The builds' folder (`apps.build.dir`): where a test looks at what a build left. */
  buildDir: string;
}

export interface AppsServerOptions {
  config?: TestAppOptions['config'];
  /** Plugins beside the git host and apps (the gateway's, for an app that calls it). */
  plugins?: Record<string, unknown>;
  /** `apps.build` settings over the defaults (its folder and a 120 s timeout): registries, limits. */
  build?: Record<string, unknown>;
}

/** The service with the git host and apps, listening on loopback (git pushes over HTTP), the proxy on a free port. */
export async function appsServer(t: Test, options: AppsServerOptions = {}): Promise<AppsServer> {
  // Private, as the service's data directory is (its default home): apps running as uids of their own
  // still reach their folders, which the sandbox binds in before dropping to the app's uid.
  const buildDir = mkdtempSync(join(tmpdir(), 'svc-apps-'));
  chmodSync(buildDir, 0o700);
  t.teardown(() => rmSync(buildDir, { recursive: true, force: true }));
  const test = await buildTestApp(t, {
    ...(options.config ? { config: options.config } : {}),
    plugins: {
      keys: {},
      projects: {},
      githost: {},
      ...options.plugins,
      apps: {
        proxy: { port: 0 },
        runtime: { healthTimeoutMs: 15_000, stopGraceMs: 2_000 },
        build: { dir: buildDir, timeoutMs: 120_000, ...options.build },
      },
    },
  });
  await test.app.listen({ host: '127.0.0.1', port: 0 });
  const { port } = test.app.server.address() as AddressInfo;
  const deployKey = (await createKey(test, { scopes: ['apps:deploy', 'apps:read'] })).key;
  return { test, orgUrl: `http://127.0.0.1:${port}/git/${test.organizationId}`, deployKey, buildDir };
}

/** A 5-line node server answering `text` on PORT, closing its server on SIGTERM (so a swap loses nothing). */
export function serverSource(text: string): Record<string, string> {
  return {
    'package.json': '{"name":"hello","scripts":{"start":"node server.js"}}\n',
    'index.js': '',
    'server.js': [
      "const http = require('node:http');",
      `const server = http.createServer((req, res) => res.end(${JSON.stringify(text)}));`,
      'server.listen(Number(process.env.PORT), "127.0.0.1");',
      "process.on('SIGTERM', () => server.close());",
      '',
    ].join('\n'),
  };
}

/** Writes files into the working copy, commits and answers the commit. */
export async function commitFiles(t: Test, dir: string, files: Record<string, string>, message: string): Promise<string> {
  for (const [name, content] of Object.entries(files)) writeFileSync(join(dir, name), content);
  await git(t, dir, ['add', '.']);
  await git(t, dir, ['commit', '--quiet', '-m', message]);
  return (await git(t, dir, ['rev-parse', 'HEAD'])).stdout.trim();
}

/** Polls until the app's latest deployment (of `commit`, when given) is done; answers it. */
export async function settledDeployment(
  test: TestApp,
  appId: string,
  predicate: (deployment: { status: string; commit: string | null; id: string }) => boolean = () => true,
  timeoutMs = 120_000,
): Promise<{
  id: string;
  status: string;
  commit: string | null;
  failureReason: string | null;
  failureCode?: string | null;
  timings: Record<string, number | null> | null;
  imageSizeBytes: number | null;
}> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const progress = (await test.call('GET', `/client/apps/${appId}/progress`)).json();
    if (progress.done && progress.deployment && predicate(progress.deployment)) return progress.deployment;
    if (Date.now() > until) throw new Error(`deployment not settled: ${JSON.stringify(progress)}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/**
 * An app launched from one of the service's templates and waited for until live (both asserted):
 * its records, the `Host` the proxy serves it under, its first deployment and the proxy's port.
 */
export async function liveTemplateApp(t: Test, test: TestApp, template: string, name: string) {
  const launched = await test.call('POST', `/client/apps/templates/${template}`, { body: { name } });
  t.equal(launched.statusCode, 202, launched.body);
  const { app, service } = launched.json() as { app: { id: string; slug: string }; service: { id: string } };
  const deployment = await settledDeployment(test, app.id);
  t.equal(deployment.status, 'live', deployment.failureReason ?? '');
  const proxyPort = () => test.app.svc.container.resolve(AppsTokens.Host).proxy?.port ?? 0;
  return { app, service, host: `${app.slug}.localhost`, deployment, proxyPort };
}

/**
 * An app of the default project with its web service and one deployment, stored as the deploy route
 * stores them (no build runs): for tests that need the records, not a running app.
 */
export async function storedApp(
  test: TestApp,
  name: string,
  owner: { organizationId: string; projectId: string } = { organizationId: test.organizationId, projectId: test.defaultProjectId },
): Promise<{ appId: string; serviceId: string; deploymentId: string }> {
  const database = test.app.svc.container.resolve(Tokens.Database);
  const store = new AppsStore(database);
  const ids = { appId: randomUUID(), serviceId: randomUUID(), deploymentId: randomUUID() };
  await database.transaction(async (tx) => {
    const now = new Date();
    const app = {
      id: ids.appId,
      organizationId: owner.organizationId,
      projectId: owner.projectId,
      name,
      slug: name,
      sourceKind: 'githost' as const,
      sourceRepo: name,
      sourceUrl: null,
      branch: 'main',
      rootDir: null,
      startCommand: null,
      deployOnPush: false,
      cell: 'local',
    };
    await store.createApp(tx, app, ids.serviceId, now);
    const deployment = { id: ids.deploymentId, serviceId: ids.serviceId, organizationId: owner.organizationId, commitSha: null, reason: 'create' as const };
    await store.createDeployment(tx, { ...deployment, rollbackOf: null, decision: null, idempotencyKey: null }, now);
  });
  return ids;
}
