import { execFileSync } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { Tokens } from '../../../core/kernel/di-tokens.ts';
import { buildTestApp, createKey } from '../../helpers/app.ts';
import { startFakeKubernetesApi } from '../../fakes/fake-kubernetes-api.ts';
import { git, serverSource, settledDeployment, tinyApp } from './apps-fixtures.ts';

/**
 * A push deployed with `apps.runtime.provider: kubernetes` against the fake API server (no real
 * cluster in CI): the build runs here, the Deployment is written to the cluster, and its init
 * container fetches the artifact from this service's signed artifact URL (the fake really fetches it).
 */
t.setTimeout(300_000);

async function freePort(): Promise<number> {
  const probe = createServer();
  await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
  const { port } = probe.address() as AddressInfo;
  await new Promise((resolve) => probe.close(resolve));
  return port;
}

t.test('a push deploys to the cluster; the init container fetches the artifact through a signed URL', async (t) => {
  const fake = await startFakeKubernetesApi({ tickMs: 20, fetchArtifacts: true });
  t.teardown(() => fake.close());
  const dir = mkdtempSync(join(tmpdir(), 'svc-apps-kube-'));
  chmodSync(dir, 0o700);
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const kubeconfig = join(dir, 'kubeconfig');
  writeFileSync(kubeconfig, fake.kubeconfig('apps'));
  const port = await freePort();
  const test = await buildTestApp(t, {
    plugins: {
      keys: {},
      projects: {},
      githost: {},
      apps: {
        proxy: { port: 0 },
        runtime: {
          provider: 'kubernetes',
          kubernetes: {
            kubeconfig,
            namespace: 'apps',
            baseImage: 'node:20-bookworm-slim',
            artifactUrlBase: `http://127.0.0.1:${port}`,
            pollMs: 20,
            rolloutTimeoutMs: 20_000,
          },
        },
        build: { dir: join(dir, 'build'), timeoutMs: 120_000 },
      },
    },
  });
  await test.app.listen({ host: '127.0.0.1', port });
  const deployKey = (await createKey(test, { scopes: ['apps:deploy', 'apps:read'] })).key;
  t.equal((await test.call('POST', '/client/githost/repos', { body: { name: 'hello' } })).statusCode, 201);
  const work = await tinyApp(t, serverSource('v1'));
  await git(t, work.dir, ['push', '--quiet', `http://127.0.0.1:${port}/git/${test.organizationId}/hello.git`, 'main'], deployKey);

  const response = await test.call('POST', '/client/apps/githost', { body: { repo: 'hello', env: { GREETING: 'hi' } } });
  t.equal(response.statusCode, 202, response.body);
  const { app, service } = response.json();
  const deployment = await settledDeployment(test, app.id);
  t.equal(deployment.status, 'live', deployment.failureReason ?? '');

  const written = fake.get('deployments', `app-${service.id}`, 'apps');
  t.equal(written?.['spec'].template.metadata.labels['apps.svc.dev/deployment'], deployment.id);
  t.same(written?.['spec'].template.spec.containers[0].command, ['/bin/sh', '-c', 'node server.js']);
  t.equal(fake.fetches.length, 1);
  const fetched = fake.fetches[0]!;
  t.match(fetched, { status: 200, gzip: true });
  t.match(fetched.url, new RegExp(`^http://127\\.0\\.0\\.1:${port}/apps-artifacts/${deployment.id}\\.tar\\.gz\\?expires=\\d+&signature=[0-9a-f]{64}$`));
  const secret = fake.get('secrets', `app-${service.id}-env`, 'apps');
  t.equal(Buffer.from(secret?.['data']['GREETING'], 'base64').toString(), 'hi');

  await t.test('the signed URL serves the built folder as a gzipped tar', async (t) => {
    const url = new URL(fetched.url);
    const answer = await test.app.inject({ method: 'GET', url: url.pathname + url.search });
    t.equal(answer.statusCode, 200);
    t.equal(answer.headers['content-type'], 'application/gzip');
    const listing = execFileSync('tar', ['-tzf', '-'], { input: answer.rawPayload }).toString();
    t.match(listing, /\.\/server\.js/);
    t.notMatch(listing, /\.git\//, 'no .git in the artifact');
  });

  await t.test('a wrong signature, an expired URL or no signature answers 404 deployment_not_found', async (t) => {
    const url = new URL(fetched.url);
    const signature = url.searchParams.get('signature')!;
    const wrong = new URLSearchParams({ expires: url.searchParams.get('expires')!, signature: signature.replace(/^./, signature[0] === 'a' ? 'b' : 'a') });
    const later = new URLSearchParams({ expires: String(Number(url.searchParams.get('expires')) + 1), signature });
    const expired = new URLSearchParams({ expires: '1000', signature });
    for (const query of [wrong, later, expired, new URLSearchParams()]) {
      const answer = await test.app.inject({ method: 'GET', url: `${url.pathname}?${query}` });
      t.equal(answer.statusCode, 404, query.toString());
      t.equal(answer.json().error.code, 'deployment_not_found');
    }
  });

  await t.test('the signing key is kept in the secret vault, one for every replica', async (t) => {
    const stored = await test.app.svc.container.resolve(Tokens.Secrets).get({ kind: 'apps.runtime', id: 'artifact-urls' }, 'hmac-key');
    t.match(stored?.value.reveal(), /^[0-9a-f]{64}$/);
  });

  await t.test('a static site runs the file server its artifact carries, listening on the pod address', async (t) => {
    t.equal((await test.call('POST', '/client/githost/repos', { body: { name: 'site' } })).statusCode, 201);
    const site = await tinyApp(t, { 'index.html': '<!doctype html><title>Site</title>\n' });
    await git(t, site.dir, ['rm', '--quiet', 'package.json', 'index.js']);
    await git(t, site.dir, ['commit', '--quiet', '-m', 'only the site']);
    const siteUrl = `http://127.0.0.1:${port}/git/${test.organizationId}/site.git`;
    await git(t, site.dir, ['push', '--quiet', siteUrl, 'main'], deployKey);
    const created = await test.call('POST', '/client/apps/githost', { body: { repo: 'site' } });
    t.equal(created.statusCode, 202, created.body);
    const done = await settledDeployment(test, created.json().app.id);
    t.equal(done.status, 'live', done.failureReason ?? '');
    const pod = fake.get('deployments', `app-${created.json().service.id}`, 'apps')?.['spec'].template.spec;
    t.same(pod.containers[0].command, ['/bin/sh', '-c', 'exec node static-server.mjs --root site --host 0.0.0.0']);
    const url = new URL(fake.fetches.at(-1)!.url);
    const answer = await test.app.inject({ method: 'GET', url: url.pathname + url.search });
    const listing = execFileSync('tar', ['-tzf', '-'], { input: answer.rawPayload }).toString().split('\n');
    const selfContained = listing.includes('./static-server.mjs') && listing.includes('./site/index.html');
    t.ok(selfContained, 'the server and the site, self-contained');
  });
});
