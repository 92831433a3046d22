import { execFile } from 'node:child_process';
import { createHmac } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import type { Test } from 'tap';
import { createOrganizationIn, issueSession } from '../../../core/identity/identity-admin.ts';
import { Tokens } from '../../../core/kernel/di-tokens.ts';
import { type FakeGitHub, startFakeGitHub } from '../../fakes/fake-github.ts';
import { buildTestApp, type TestApp } from '../../helpers/app.ts';

const run = promisify(execFile);

export const WEBHOOK_SECRET = 'whsec-fake-github-0123456789';

export interface GitHubServer {
  test: TestApp;
  github: FakeGitHub;
}

/** The service with `provider: github` pointed at a fake GitHub on loopback (hence allowPrivateNetwork). */
export async function githubServer(t: Test, options: { clock?: () => Date; plugins?: Record<string, unknown> } = {}): Promise<GitHubServer> {
  const github = await startFakeGitHub();
  t.teardown(() => github.close());
  const test = await buildTestApp(t, {
    ...(options.clock ? { clock: options.clock } : {}),
    config: { outbound: { allowPrivateNetwork: true } },
    plugins: {
      keys: {},
      ...options.plugins,
      githost: {
        provider: 'github',
        github: {
          appId: github.appId,
          appSlug: 'svc-test-app',
          privateKey: github.privateKey,
          clientId: 'Iv1.fakeclient',
          clientSecret: 'fake-client-secret',
          webhookSecret: WEBHOOK_SECRET,
          apiBaseUrl: github.url,
          webBaseUrl: github.url,
        },
      },
    },
  });
  return { test, github };
}

/** Walks the OAuth round trip as the browser would: authorize, then GitHub's redirect to the callback with code and state. */
export async function connectAccount(server: GitHubServer, user: { id: number; login: string; installations: number[] }, token?: string): Promise<{ statusCode: number; body: string }> {
  const started = await server.test.call('GET', '/client/githost/authorize', { token });
  if (started.statusCode !== 200) throw new Error(`authorize: ${started.statusCode} ${started.body}`);
  const state = new URL(started.json().url).searchParams.get('state') ?? '';
  const code = server.github.codeFor(user);
  const back = await server.test.call('GET', `/client/githost/callback?code=${code}&state=${encodeURIComponent(state)}`, { token: null });
  return { statusCode: back.statusCode, body: back.body };
}

/** A second organisation with its owner's session token. */
export async function otherOrganization(test: TestApp): Promise<{ organizationId: string; ownerToken: string }> {
  const identity = test.app.svc.container.resolve(Tokens.Identity);
  const { organization, owner } = await createOrganizationIn(identity, { name: 'Other', ownerEmail: `other-${Date.now()}@example.com`, ownerName: 'Other' });
  const { token } = await issueSession(identity, { personId: owner.id, ttlDays: 1, now: new Date() });
  return { organizationId: organization.id, ownerToken: token };
}

/** A bare repository holding one commit of a tiny app on main; answers its folder and the commit. */
export async function bareRepo(t: Test, files: Record<string, string> = { 'package.json': '{"name":"hello","scripts":{"start":"node index.js"}}\n' }) {
  const work = mkdtempSync(join(tmpdir(), 'fake-github-work-'));
  const bare = mkdtempSync(join(tmpdir(), 'fake-github-bare-'));
  t.teardown(() => {
    rmSync(work, { recursive: true, force: true });
    rmSync(bare, { recursive: true, force: true });
  });
  const env = { PATH: process.env.PATH, HOME: work, GIT_CONFIG_NOSYSTEM: '1', LANG: 'C' };
  const git = (cwd: string, args: string[]) => run('git', ['-c', 'user.name=Test', '-c', 'user.email=test@example.com', ...args], { cwd, env });
  await git(work, ['init', '--quiet', '--initial-branch=main']);
  const { writeFileSync } = await import('node:fs');
  for (const [name, content] of Object.entries(files)) writeFileSync(join(work, name), content);
  await git(work, ['add', '.']);
  await git(work, ['commit', '--quiet', '-m', 'first']);
  const first = (await git(work, ['rev-parse', 'HEAD'])).stdout.trim();
  writeFileSync(join(work, 'second.txt'), 'two\n');
  await git(work, ['add', '.']);
  await git(work, ['commit', '--quiet', '-m', 'second']);
  const second = (await git(work, ['rev-parse', 'HEAD'])).stdout.trim();
  await git(work, ['clone', '--quiet', '--bare', work, join(bare, 'repo.git')]);
  return { dir: join(bare, 'repo.git'), first, second };
}

/** GitHub's signature of a delivery: `sha256=` HMAC of the raw body. */
export function signed(body: string, secret = WEBHOOK_SECRET): string {
  return `sha256=${createHmac('sha256', secret).update(body).digest('hex')}`;
}

export async function deliver(test: TestApp, event: string, payload: unknown, signature?: string | null) {
  const body = JSON.stringify(payload);
  const headers: Record<string, string> = { 'content-type': 'application/json', 'x-github-event': event, 'x-github-delivery': '72d3162e-cc78-11e3-81ab-4c9367dc0958' };
  const sig = signature === undefined ? signed(body) : signature;
  if (sig !== null) headers['x-hub-signature-256'] = sig;
  return test.app.inject({ method: 'POST', url: '/githost/github/webhook', headers, payload: body });
}
