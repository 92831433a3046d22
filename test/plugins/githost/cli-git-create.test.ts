import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import t from 'tap';

const run = promisify(execFile);

// Each command is a process of its own started through tsx: slow on a loaded machine.
t.setTimeout(400_000);

async function cli(dataDir: string, ...args: string[]) {
  const env = { ...process.env, SVC_DATA_DIR: dataDir, DATABASE_URL: '' };
  try {
    const { stdout, stderr } = await run(process.execPath, ['--import', 'tsx', 'cli.ts', ...args], { env, timeout: 180_000 });
    return { code: 0, stdout, stderr };
  } catch (error) {
    const failed = error as { code: number; stdout: string; stderr: string };
    return { code: failed.code, stdout: failed.stdout, stderr: failed.stderr };
  }
}

t.test('git create makes an empty repository of the only organisation and prints the URL to push to', async (t) => {
  const dataDir = mkdtempSync(join(tmpdir(), 'svc-cli-git-'));
  t.teardown(() => rmSync(dataDir, { recursive: true, force: true }));
  const org = await cli(dataDir, 'orgs', 'create', '--name', 'Acme', '--owner-email', 'boss@acme.test');
  t.equal(org.code, 0, org.stderr);
  const organizationId = /organisation ([0-9a-f-]{36})/.exec(org.stdout)?.[1] ?? '';

  const created = await cli(dataDir, 'git', 'create', 'hello');
  t.equal(created.code, 0, created.stderr);
  t.equal(created.stdout, `http://127.0.0.1:8080/git/${organizationId}/hello.git\n`);
  t.ok(existsSync(join(dataDir, 'git', organizationId, 'hello.git', 'HEAD')), 'a bare repository under <dataDir>/git/<org>/');

  const again = await cli(dataDir, 'git', 'create', 'hello', '--org', organizationId);
  t.equal(again.code, 2);
  t.match(again.stderr, /has a repository named hello already/);
  const badName = await cli(dataDir, 'git', 'create', '../escape');
  t.equal(badName.code, 2);
  t.match(badName.stderr, /lowercase letters, digits and dashes/);
});
