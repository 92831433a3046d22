import t from 'tap';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createPgliteDatabase } from '../../adapters/pglite/pglite-database.ts';

/**
 * PGlite runs PostgreSQL with fsync off (`-F`) and its Node file system has no fsync, but every
 * write reaches the kernel at once: a process killed with SIGKILL must keep every commit it
 * acknowledged. The billing journal relies on it, deleting a segment once its rows are committed.
 * (A machine failure is another matter: see README, Money across a crash.) The second round kills
 * a process that started by recovering from the first kill.
 */
t.setTimeout(180_000);

const ROUNDS = 2;
const COMMITS_PER_ROUND = 50;

t.test('PGlite on disk keeps every acknowledged commit when its process is killed', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'svc-pglite-kill-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  for (let round = 0; round < ROUNDS; round += 1) {
    const child = spawn(process.execPath, ['--import', 'tsx', 'test/fixtures/pglite-commit-loop.ts', dir], { stdio: ['ignore', 'pipe', 'inherit'] });
    const exited = once(child, 'exit');
    let acknowledged = -1;
    let seen = 0;
    let pending = '';
    child.stdout.on('data', (chunk: Buffer) => {
      pending += chunk.toString();
      const lines = pending.split('\n');
      pending = lines.pop()!;
      for (const line of lines) {
        acknowledged = Number(line);
        seen += 1;
        // Killed while it keeps committing: the next transaction is under way.
        if (seen === COMMITS_PER_ROUND) child.kill('SIGKILL');
      }
    });
    await exited;
    const db = await createPgliteDatabase({ dataDir: dir });
    const stored = await db.query<{ n: number; last: number }>('SELECT count(*)::int AS n, max(id) AS last FROM commits');
    await db.close();
    t.ok(stored.rows[0]!.last >= acknowledged, `round ${round}: commit ${acknowledged} was acknowledged, ${stored.rows[0]!.last} is stored`);
    t.equal(stored.rows[0]!.n, stored.rows[0]!.last + 1, 'and every one before it');
  }
});
