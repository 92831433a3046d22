import t from 'tap';
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { loadConfig } from '../../../config/load.ts';
import { createDatabase } from '../../../composition/create-database.ts';
import { coreMigrations } from '../../../adapters/sql/core-migrations.ts';
import { runMigrations } from '../../../adapters/sql/migrator.ts';
import { sqlIdentityStores } from '../../../adapters/sql/identity-stores.ts';
import { createOrganizationWithOwner } from '../../../core/identity/identity-admin.ts';
import type { Database } from '../../../core/ports/database.ts';
import { supportMigrations } from '../../../plugins/support/support-migrations.ts';
import { SupportStore } from '../../../plugins/support/support-store.ts';

/**
 * `npm run cli -- support …` against the embedded database, as an operator runs it with the service
 * stopped: the queue of requests, one request, a reply (its announcement left on the service's
 * queue) and solving.
 */
t.setTimeout(240_000);
const run = promisify(execFile);
const dataDir = mkdtempSync(join(tmpdir(), 'svc-support-cli-'));
t.teardown(() => rmSync(dataDir, { recursive: true, force: true }));

async function cli(...args: string[]) {
  const env = { ...process.env, SVC_DATA_DIR: dataDir, DATABASE_URL: '', SVC_SECRET_KEYS: '' };
  try {
    const { stdout, stderr } = await run(process.execPath, ['--import', 'tsx', 'cli.ts', ...args], { env, timeout: 60_000 });
    return { code: 0, stdout, stderr };
  } catch (error) {
    const failed = error as { code: number; stdout: string; stderr: string };
    return { code: failed.code, stdout: failed.stdout, stderr: failed.stderr };
  }
}

/** The CLI's database, opened here between runs (PGlite allows one process at a time). */
async function withDatabase<T>(work: (db: Database) => Promise<T>): Promise<T> {
  const db = await createDatabase(loadConfig({ env: { SVC_DATA_DIR: dataDir } }).storage.database);
  try {
    await runMigrations(db, coreMigrations);
    await runMigrations(db, supportMigrations);
    return await work(db);
  } finally {
    await db.close();
  }
}

const requestId = await withDatabase(async (db) => {
  const { organization, owner } = await createOrganizationWithOwner(db, sqlIdentityStores, { name: 'Acme', ownerEmail: 'ada@acme.test', ownerName: 'Ada' });
  return db.transaction((tx) =>
    new SupportStore(db).create(tx, {
      organizationId: organization.id,
      requesterId: owner.id,
      subject: 'Our invoices name the wrong company',
      message: { author: { kind: 'person', id: owner.id, name: 'Ada' }, body: 'It says Acme Ltd.', attachments: [] },
      now: new Date(),
    }),
  );
});

t.test('support list shows the requests waiting on support, and show one with its messages', async (t) => {
  const listed = await cli('support', 'list');
  t.equal(listed.code, 0, listed.stderr);
  t.match(listed.stdout, new RegExp(`${requestId}  open .*ada@acme\\.test  Our invoices name the wrong company`));
  const shown = await cli('support', 'show', '--request', requestId);
  t.equal(shown.code, 0, shown.stderr);
  t.match(shown.stdout, /Our invoices name the wrong company[\s\S]*from Ada <ada@acme\.test>[\s\S]*--- Ada, [^\n]*\nIt says Acme Ltd\./);
});

t.test('support reply answers as the operator and leaves the announcement on the queue for the service', async (t) => {
  const replied = await cli('support', 'reply', '--request', requestId, '--message', 'Fixed from April on.', '--as', 'Sam');
  t.equal(replied.code, 0, replied.stderr);
  t.match(replied.stdout, /answered .* as Sam/);
  await withDatabase(async (db) => {
    const messages = await new SupportStore(db).messages(requestId);
    t.match(messages.at(-1), { author: { kind: 'support', id: null, name: 'Sam' }, body: 'Fixed from April on.' });
    const { rows } = await db.query<{ queue: string; state: string; payload: unknown }>("SELECT queue, state, payload FROM jobs WHERE queue = 'support.acts'");
    t.match(rows, [{ state: 'queued', payload: { requestId, act: 'answered', operator: 'Sam' } }]);
  });
  t.match((await cli('support', 'list', '--status', 'answered')).stdout, requestId);
});

t.test('support solve marks it solved; an unknown request or a missing flag is said so', async (t) => {
  t.match((await cli('support', 'solve', '--request', requestId)).stdout, `solved ${requestId}`);
  const unknown = await cli('support', 'show', '--request', '00000000-0000-4000-8000-000000000000');
  t.equal(unknown.code, 1);
  t.match(unknown.stdout, 'no support request');
  const missing = await cli('support', 'reply', '--request', requestId);
  t.equal(missing.code, 2);
  t.match(missing.stderr, 'missing --message');
});
