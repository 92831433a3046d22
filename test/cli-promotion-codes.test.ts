import t from 'tap';
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

/** Runs the CLI against an embedded database in a temporary directory. */
async function cli(dataDir: string, ...args: string[]) {
  const env = { ...process.env, SVC_DATA_DIR: dataDir, DATABASE_URL: '' };
  try {
    const { stdout, stderr } = await run(process.execPath, ['--import', 'tsx', 'cli.ts', ...args], { env, timeout: 60_000 });
    return { code: 0, stdout, stderr };
  } catch (error) {
    const failed = error as { code: number; stdout: string; stderr: string };
    return { code: failed.code, stdout: failed.stdout, stderr: failed.stderr };
  }
}

// Each run starts a process and opens the embedded database: about ten seconds on a busy machine.
t.setTimeout(300_000);

t.test('operator CLI: promotion codes', async (t) => {
  const dataDir = mkdtempSync(join(tmpdir(), 'svc-cli-codes-'));
  t.teardown(() => rmSync(dataDir, { recursive: true, force: true }));
  t.test('makes a promotion code, shown once: the list names it by its last four characters, never whole', async (t) => {
    const made = await cli(dataDir, 'credits', 'codes', 'create', '--amount', '25', '--expires', '2099-01-01', '--max-redemptions', '3', '--label', 'Launch week');
    t.equal(made.code, 0, made.stderr);
    const code = /^([0-9A-Z]{4}(?:-[0-9A-Z]{4}){3})$/m.exec(made.stdout)?.[1] ?? '';
    t.ok(code, made.stdout);
    t.match(made.stdout, /"Launch week" {2}\$25 {2}until 2099-01-01T00:00:00\.000Z {2}0\/3 redeemed {2}active/);
    const listed = await cli(dataDir, 'credits', 'codes', 'list');
    t.equal(listed.code, 0, listed.stderr);
    t.match(listed.stdout, new RegExp(`…${code.slice(-4)} {2}"Launch week"`));
    t.notMatch(listed.stdout, code, 'the code itself is not listed');
  });

  t.test('withdraws a promotion code by its id', async (t) => {
    const made = await cli(dataDir, 'credits', 'codes', 'create', '--amount', '1.5', '--expires', '2099-01-01');
    const id = /promotion code ([0-9a-f-]{36})/.exec(made.stdout)?.[1] ?? '';
    const revoked = await cli(dataDir, 'credits', 'codes', 'revoke', '--id', id);
    t.equal(revoked.code, 0, revoked.stderr);
    t.match(revoked.stdout, /withdrawn: .*"Promotional credit" {2}\$1\.5 .*withdrawn \d{4}-/);
    t.equal((await cli(dataDir, 'credits', 'codes', 'revoke', '--id', '5a0c1e7e-0000-4000-8000-000000000000')).code, 2, 'an unknown id');
  });

  t.test('refuses a promotion code without a positive amount or a future expiry, with usage and exit code 2', async (t) => {
    for (const args of [
      ['--amount', '0', '--expires', '2099-01-01'],
      ['--amount', '5', '--expires', '2001-01-01'],
      ['--amount', '5', '--expires', '2099-01-01', '--max-redemptions', '0'],
    ]) {
      const refused = await cli(dataDir, 'credits', 'codes', 'create', ...args);
      t.equal(refused.code, 2, args.join(' '));
    }
  });
});
