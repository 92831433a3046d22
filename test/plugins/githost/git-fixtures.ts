import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import type { Test } from 'tap';
import { Tokens } from '../../../core/kernel/di-tokens.ts';
import { buildTestApp, createKey, type TestApp } from '../../helpers/app.ts';

/** The local git server listening on a loopback port, with keys to fetch and push, and the system's git to drive it. */
const run = promisify(execFile);

export interface Server {
  test: TestApp;
  /** http://127.0.0.1:<port>/git/<org> */
  orgUrl: string;
  deployKey: string;
  readKey: string;
}

export async function gitServer(t: Test, githost: Record<string, unknown> = {}): Promise<Server> {
  const test = await buildTestApp(t, { plugins: { keys: {}, githost } });
  await test.app.listen({ host: '127.0.0.1', port: 0 });
  const { port } = test.app.server.address() as AddressInfo;
  const deployKey = (await createKey(test, { scopes: ['apps:deploy', 'apps:read'] })).key;
  const readKey = (await createKey(test, { scopes: ['apps:read'] })).key;
  return { test, orgUrl: `http://127.0.0.1:${port}/git/${test.organizationId}`, deployKey, readKey };
}

export async function createRepo(server: Server, name: string): Promise<{ cloneUrl: string }> {
  const response = await server.test.call('POST', '/client/githost/repos', { body: { name } });
  if (response.statusCode !== 201) throw new Error(`create ${name}: ${response.statusCode} ${response.body}`);
  return response.json();
}

/** The system's git with no user or system configuration; the key is given by a credential helper, asked after a 401. */
export async function git(t: Test, cwd: string, args: string[], key?: string): Promise<{ stdout: string; stderr: string }> {
  const home = mkdtempSync(join(tmpdir(), 'githost-home-'));
  t.teardown(() => rmSync(home, { recursive: true, force: true }));
  const helper = key ? ['-c', `credential.helper=!f() { echo username=deploy; echo password=${key}; }; f`] : [];
  return run('git', [...helper, '-c', 'user.name=Test', '-c', 'user.email=test@example.com', ...args], {
    cwd,
    env: { PATH: process.env.PATH, HOME: home, GIT_CONFIG_NOSYSTEM: '1', GIT_TERMINAL_PROMPT: '0', LANG: 'C' },
  });
}

/** A working copy holding a tiny app, committed on main. */
export async function tinyApp(t: Test, files: Record<string, string | Buffer> = {}): Promise<{ dir: string; commit: string }> {
  const dir = mkdtempSync(join(tmpdir(), 'githost-app-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  await git(t, dir, ['init', '--quiet', '--initial-branch=main']);
  const all = { 'package.json': '{"name":"hello","scripts":{"start":"node index.js"}}\n', 'index.js': 'console.log("hello")\n', ...files };
  for (const [name, content] of Object.entries(all)) writeFileSync(join(dir, name), content);
  await git(t, dir, ['add', '.']);
  await git(t, dir, ['commit', '--quiet', '-m', 'hello']);
  return { dir, commit: (await git(t, dir, ['rev-parse', 'HEAD'])).stdout.trim() };
}

export async function pushedEvents(test: TestApp): Promise<Array<{ subject: string; organizationId: string; data: Record<string, unknown>; actor: { kind: string } }>> {
  const db = test.app.svc.container.resolve(Tokens.Database);
  const { rows } = await db.query<{ subject: string; organization_id: string; data: unknown; actor: unknown; occurred_at: Date }>(
    "SELECT subject, organization_id, data, actor, occurred_at FROM events WHERE type = 'githost.pushed' ORDER BY occurred_at",
  );
  const parse = (value: unknown) => (typeof value === 'string' ? JSON.parse(value) : value);
  return rows.map((row) => ({ subject: row.subject, organizationId: row.organization_id, data: parse(row.data), actor: parse(row.actor) }));
}
