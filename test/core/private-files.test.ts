import t, { type Test } from 'tap';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { chmodSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { FilesystemBlobStore } from '../../adapters/filesystem/filesystem-blob-store.ts';
import { createPgliteDatabase } from '../../adapters/pglite/pglite-database.ts';
import { tightenTree } from '../../core/kernel/private-files.ts';
import { eventually } from '../helpers/eventually.ts';

/*
 * The service's own files (embedded database, billing journal, blobs, key file) hold live
 * set-password tokens, key hashes and the key that opens customer secrets: other local users must
 * not read them, whatever umask the service was started under.
 */

/** Every path under `root` (itself included) whose mode lets the group or others in, with that mode. */
function readableByOthers(root: string): string[] {
  const found: string[] = [];
  const pending = [root];
  while (pending.length > 0) {
    const current = pending.pop()!;
    const stats = lstatSync(current);
    if (stats.isSymbolicLink()) continue;
    if ((stats.mode & 0o077) !== 0) found.push(`${current} ${(stats.mode & 0o777).toString(8)}`);
    if (stats.isDirectory()) for (const name of readdirSync(current)) pending.push(join(current, name));
  }
  return found;
}

/** Every directory under `root` to 0777 and every file to 0666, as a permissive umask leaves them. */
function loosen(root: string): number {
  let entries = 0;
  const pending = [root];
  while (pending.length > 0) {
    const current = pending.pop()!;
    const directory = lstatSync(current).isDirectory();
    chmodSync(current, directory ? 0o777 : 0o666);
    entries += 1;
    if (directory) for (const name of readdirSync(current)) pending.push(join(current, name));
  }
  return entries;
}

function temporaryDir(t: Test, name: string): string {
  const dir = mkdtempSync(join(tmpdir(), `svc-${name}-`));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

interface Started {
  lines: Array<Record<string, unknown>>;
  stop(): Promise<number | null>;
}

/** `npm start` (main.ts) in a child process started under umask 000, until it listens. */
async function startService(t: Test, dataDir: string): Promise<Started> {
  const child = spawn('sh', ['-c', `umask 000 && exec "${process.execPath}" --import tsx main.ts`], {
    env: { ...process.env, SVC_DATA_DIR: dataDir, PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'info', DATABASE_URL: '', REDIS_URL: '', SVC_SECRET_KEYS: '' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  t.teardown(() => child.kill('SIGKILL'));
  const lines: Array<Record<string, unknown>> = [];
  let output = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
    output += chunk;
    const complete = output.split('\n');
    output = complete.pop()!;
    for (const line of complete) if (line.startsWith('{')) lines.push(JSON.parse(line) as Record<string, unknown>);
  });
  let errors = '';
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (errors += chunk));
  const exited = once(child, 'exit');
  await eventually(
    () => {
      if (child.exitCode !== null) throw new Error(`the service exited: ${errors}`);
      return lines.some((line) => String(line.msg).startsWith('Server listening'));
    },
    'the service to listen',
    { timeoutMs: 240_000, everyMs: 50 },
  );
  return {
    lines,
    async stop() {
      child.kill('SIGTERM');
      const [code] = await exited;
      return code as number | null;
    },
  };
}

// Each start compiles main.ts's modules with tsx and may run initdb: tens of seconds on a loaded machine.
t.setTimeout(600_000);

const tighteningLines = (lines: Array<Record<string, unknown>>) => lines.filter((line) => /private to this user/.test(String(line.msg)));

t.test('started under umask 000, the service creates no file or folder of its data directory that others can read', async (t) => {
  const dataDir = join(temporaryDir(t, 'umask'), 'data');
  const service = await startService(t, dataDir);
  t.equal(await service.stop(), 0, 'stopped cleanly');
  const entries = readdirSync(dataDir);
  t.ok(
    ['pglite', 'journal', 'secret-keys'].every((name) => entries.includes(name)),
    `database, journal and key file were created (${entries.join(', ')})`,
  );
  t.same(readableByOthers(dataDir), [], 'every folder is 0700 or narrower, every file 0600 or narrower');
  t.same(tighteningLines(service.lines), [], 'nothing needed tightening');
});

t.test('a data directory others can read is made private at start, with one log line', async (t) => {
  const dataDir = join(temporaryDir(t, 'loose'), 'data');
  // An embedded database as an earlier version left it (its 1,000 files), then opened to everyone.
  await (await createPgliteDatabase({ dataDir: join(dataDir, 'pglite') })).close();
  const uploads = join(dataDir, 'blobs', 'data', 'files', 'org');
  mkdirSync(uploads, { recursive: true });
  for (let i = 0; i < 200; i += 1) writeFileSync(join(uploads, `blob-${i}`), 'contents');
  const entries = loosen(dataDir);
  t.ok(entries > 1000, `the data directory holds over 1,000 files and folders (${entries})`);
  const service = await startService(t, dataDir);
  t.same(readableByOthers(dataDir), [], 'everything is private again');
  const logged = tighteningLines(service.lines);
  t.equal(logged.length, 1, 'one log line');
  t.equal(logged[0]?.tightened, entries, 'counting every file and folder it changed');
  t.equal(await service.stop(), 0);
});

t.test('under umask 000, the embedded database on disk creates its files 0600 in 0700 folders', async (t) => {
  const previous = process.umask(0);
  t.teardown(() => void process.umask(previous));
  const dir = join(temporaryDir(t, 'pglite'), 'db');
  const db = await createPgliteDatabase({ dataDir: dir });
  // New relation files and WAL written after the start are the module's own creations too.
  await db.query('CREATE TABLE notes (body text)');
  await db.query("INSERT INTO notes SELECT repeat('x', 1000) FROM generate_series(1, 2000)");
  await db.close();
  t.same(readableByOthers(dir), []);
});

t.test('under umask 000, a blob on disk is stored 0600 in 0700 folders', async (t) => {
  const previous = process.umask(0);
  t.teardown(() => void process.umask(previous));
  const dir = join(temporaryDir(t, 'blobs'), 'blobs');
  const store = new FilesystemBlobStore(dir);
  await store.put(Readable.from([Buffer.from('contents')]), { prefix: 'files/org/' });
  t.same(readableByOthers(dir), []);
});

t.test('tightening clears group and other bits only, follows no symbolic link and reports a missing root as nothing done', async (t) => {
  const root = temporaryDir(t, 'tighten');
  const outside = temporaryDir(t, 'outside');
  mkdirSync(join(root, 'folder'), { mode: 0o755 });
  writeFileSync(join(root, 'folder', 'script'), '', { mode: 0o755 });
  writeFileSync(join(root, 'private'), '', { mode: 0o600 });
  writeFileSync(join(outside, 'theirs'), '', { mode: 0o644 });
  chmodSync(join(root, 'folder', 'script'), 0o775);
  chmodSync(join(outside, 'theirs'), 0o644);
  symlinkSync(join(outside, 'theirs'), join(root, 'link'));
  chmodSync(root, 0o755);
  t.same(tightenTree(root), { tightened: 3, failed: [] }, 'the root, the folder and the script');
  t.equal(lstatSync(join(root, 'folder', 'script')).mode & 0o777, 0o700, 'the owner keeps execute');
  t.equal(lstatSync(join(outside, 'theirs')).mode & 0o777, 0o644, 'a link’s target is not touched');
  t.same(tightenTree(join(root, 'absent')), { tightened: 0, failed: [] });
});
