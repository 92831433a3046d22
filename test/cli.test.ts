import t from 'tap';
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

// Each command is a process of its own started through tsx, and `people invite` builds the whole service:
// on a loaded 2-core machine the file outlasts tap's 120 s default.
t.setTimeout(600_000);

/** Runs the CLI against an embedded database in a temporary directory. */
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

t.test('operator CLI', async (t) => {
  const dataDir = mkdtempSync(join(tmpdir(), 'svc-cli-'));
  t.teardown(() => rmSync(dataDir, { recursive: true, force: true }));

  let organizationId = '';
  t.test('creates an organisation with its owner', async (t) => {
    const result = await cli(dataDir, 'orgs', 'create', '--name', 'Acme', '--owner-email', 'boss@acme.test');
    t.equal(result.code, 0, result.stderr);
    organizationId = /organisation ([0-9a-f-]{36})/.exec(result.stdout)?.[1] ?? '';
    t.ok(organizationId);
  });

  t.test('adds a person with a role and issues them a session token', async (t) => {
    const added = await cli(dataDir, 'people', 'add', '--org', organizationId, '--email', 'dev@acme.test', '--role', 'admin');
    t.equal(added.code, 0, added.stderr);
    const session = await cli(dataDir, 'sessions', 'create', '--email', 'dev@acme.test', '--days', '2');
    t.equal(session.code, 0, session.stderr);
    t.match(session.stdout, /svc_sess_[A-Za-z0-9]{43}/);
  });

  t.test('invites a person through an invitation: its accept link arrives by mail in the outbox, and no one is added yet', async (t) => {
    const invited = await cli(dataDir, 'people', 'invite', '--org', organizationId, '--email', 'new@acme.test', '--role', 'member');
    t.equal(invited.code, 0, invited.stderr);
    t.match(invited.stdout, /invited <new@acme\.test> as member of [0-9a-f-]{36}: invitation [0-9a-f-]{36}, link mailed/);
    t.notMatch(invited.stdout, /svc_inv_/, 'the token is in the mail only');
    const mail = await cli(dataDir, 'mail', 'list', '--to', 'new@acme.test');
    t.equal(mail.code, 0, mail.stderr);
    t.match(mail.stdout, /\/invitations\/accept\?token=svc_inv_[A-Za-z0-9]{43}/);
    const again = await cli(dataDir, 'mail', 'list', '--to', 'new@acme.test');
    t.notMatch(again.stdout, /svc_inv_/, 'the token is shown by the first reading only');
    const session = await cli(dataDir, 'sessions', 'create', '--email', 'new@acme.test');
    t.equal(session.code, 2, 'the invited person does not exist until they accept');
    t.match(session.stderr, /no person with email new@acme\.test/);
  });

  t.test('mails a person a set-password token: the password reset', async (t) => {
    const reset = await cli(dataDir, 'people', 'reset-password', '--email', 'dev@acme.test');
    t.equal(reset.code, 0, reset.stderr);
    t.notMatch(reset.stdout, /svc_pwd_/, 'the token is in the mail only');
    const mail = await cli(dataDir, 'mail', 'list', '--to', 'dev@acme.test');
    t.match(mail.stdout, /\/client\/auth\/set-password/);
    t.match(mail.stdout, /"token": "svc_pwd_[A-Za-z0-9]{43}"/);
    const unknown = await cli(dataDir, 'people', 'reset-password', '--email', 'nobody@acme.test');
    t.equal(unknown.code, 2);
  });

  t.test('refuses a bad role and an unknown command with usage and exit code 2', async (t) => {
    const badRole = await cli(dataDir, 'people', 'add', '--org', organizationId, '--email', 'x@acme.test', '--role', 'king');
    t.equal(badRole.code, 2);
    t.match(badRole.stderr, /--role must be one of/);
    const unknown = await cli(dataDir, 'frobnicate');
    t.equal(unknown.code, 2);
  });
});
