import { randomBytes, createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, readdirSync, rmSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import t, { type Test } from 'tap';
import { FilesystemBlobStore } from '../../adapters/filesystem/filesystem-blob-store.ts';
import { SqlBlobStore } from '../../adapters/sql/blob-store.ts';
import { coreMigrations } from '../../adapters/sql/core-migrations.ts';
import { runMigrations } from '../../adapters/sql/migrator.ts';
import { BlobTooLargeError, InvalidBlobKeyError, newBlobKey } from '../../core/services/blob-rules.ts';
import type { BlobStore } from '../../core/ports/blobs.ts';
import { databaseBackends } from '../helpers/databases.ts';

async function readAll(stream: Readable): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

/** The bytes in uneven pieces, as a network delivers them. */
function pieces(bytes: Buffer, size = 70_001): Readable {
  const parts: Buffer[] = [];
  for (let i = 0; i < bytes.length; i += size) parts.push(bytes.subarray(i, i + size));
  return Readable.from(parts);
}

const sha256 = (bytes: Buffer): string => createHash('sha256').update(bytes).digest('hex');

/** One suite, every blob store. */
function blobContract(t: Test, store: BlobStore): void {
  const big = randomBytes(600 * 1024 + 17); // more than two of the database store's chunks

  t.test('a put streams in and reads back the same bytes, size and sha256', async (t) => {
    const info = await store.put(pieces(big), { prefix: 'roundtrip/', contentType: 'application/jsonl' });
    t.equal(info.size, big.length);
    t.equal(info.sha256, sha256(big));
    t.equal(info.contentType, 'application/jsonl');
    t.match(info.key, /^roundtrip\/[0-9a-f]{32}$/);
    const got = await store.get(info.key);
    t.ok(got);
    t.same(got!.info, info);
    t.ok((await readAll(got!.stream)).equals(big));
  });

  t.test('an empty body is an empty blob with the hash of nothing', async (t) => {
    const info = await store.put(Readable.from([]));
    t.equal(info.size, 0);
    t.equal(info.sha256, sha256(Buffer.alloc(0)));
    t.equal(info.contentType, 'application/octet-stream');
    t.equal((await readAll((await store.get(info.key))!.stream)).length, 0);
  });

  t.test('a range reads the inclusive span, across chunk boundaries, clamped to the blob', async (t) => {
    const info = await store.put(pieces(big));
    const read = async (start: number, end?: number) => readAll((await store.get(info.key, { start, end }))!.stream);
    t.ok((await read(0, 9)).equals(big.subarray(0, 10)));
    t.ok((await read(262_140, 262_150)).equals(big.subarray(262_140, 262_151)), 'across the first chunk boundary');
    t.ok((await read(100, 600_000)).equals(big.subarray(100, 600_001)), 'across several chunks');
    t.ok((await read(big.length - 5)).equals(big.subarray(big.length - 5)), 'open-ended');
    t.ok((await read(10, big.length + 1000)).equals(big.subarray(10)), 'an end past the blob is clamped');
    t.equal((await read(big.length + 1)).length, 0, 'a start past the blob reads nothing');
  });

  t.test('head describes a blob without reading it; an unknown key is null', async (t) => {
    const info = await store.put(Readable.from([Buffer.from('hello')]), { contentType: 'text/plain' });
    t.same(await store.head(info.key), info);
    t.equal(await store.head('no/such-blob'), null);
    t.equal(await store.get('no/such-blob'), null);
  });

  t.test('a body over maxBytes fails with BlobTooLargeError and leaves nothing', async (t) => {
    await t.rejects(store.put(pieces(big), { prefix: 'too-large/', maxBytes: 300_000 }), BlobTooLargeError);
    t.same(await store.list('too-large/'), []);
    const exact = await store.put(pieces(big.subarray(0, 300_000)), { prefix: 'exact/', maxBytes: 300_000 });
    t.equal(exact.size, 300_000, 'a body of exactly maxBytes is kept');
  });

  t.test('a body that fails midway leaves nothing', async (t) => {
    async function* failing() {
      yield big.subarray(0, 300_000);
      throw new Error('client went away');
    }
    await t.rejects(store.put(failing(), { prefix: 'broken/' }), /client went away/);
    t.same(await store.list('broken/'), []);
  });

  t.test('a blob is not visible until its put has finished', async (t) => {
    let firstPieceStored!: () => void;
    const stored = new Promise<void>((resolve) => (firstPieceStored = resolve));
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    // The generator resumes after its first yield only when the store asks for more, having written it.
    async function* body() {
      yield big.subarray(0, 300_000);
      firstPieceStored();
      await released;
      yield big.subarray(300_000);
    }
    const putting = store.put(body(), { prefix: 'pending/' });
    await stored;
    t.same(await store.list('pending/'), [], 'not listed while it is being written');
    release();
    const info = await putting;
    t.same(
      (await store.list('pending/')).map((b) => b.key),
      [info.key],
    );
  });

  t.test('delete removes a blob once; afterwards it is gone', async (t) => {
    const info = await store.put(Readable.from([Buffer.from('bye')]));
    t.equal(await store.delete(info.key), true);
    t.equal(await store.delete(info.key), false);
    t.equal(await store.get(info.key), null);
    t.equal(await store.head(info.key), null);
  });

  t.test('list returns a prefix in creation order, page by page, also from inside a segment', async (t) => {
    const keys: string[] = [];
    for (let i = 0; i < 5; i++) keys.push((await store.put(Readable.from([Buffer.from(`n${i}`)]), { prefix: 'listed/org-1/' })).key);
    await store.put(Readable.from([Buffer.from('other')]), { prefix: 'listed/org-2/' });
    t.same(
      (await store.list('listed/org-1/')).map((b) => b.key),
      keys,
    );
    const first = await store.list('listed/org-1/', { limit: 2 });
    t.same(
      first.map((b) => b.key),
      keys.slice(0, 2),
    );
    t.same(
      (await store.list('listed/org-1/', { after: first[1]!.key, limit: 2 })).map((b) => b.key),
      keys.slice(2, 4),
    );
    t.equal((await store.list('listed/org-')).length, 6, 'a prefix may stop inside a segment');
    t.equal((await store.list('listed/')).length, 6);
    t.same(await store.list('nothing-here/'), []);
  });

  t.test('keys that could leave the store are refused before anything is touched', async (t) => {
    for (const key of ['../outside', 'a/../../outside', '/etc/passwd', 'a//b', '.hidden', 'a/./b', 'a/..', 'a\\..\\b', 'a\u0000b', '', 'a/', 'x'.repeat(600)]) {
      await t.rejects(store.get(key), InvalidBlobKeyError, `get ${JSON.stringify(key.slice(0, 20))}`);
      await t.rejects(store.head(key), InvalidBlobKeyError, `head ${JSON.stringify(key.slice(0, 20))}`);
      await t.rejects(store.delete(key), InvalidBlobKeyError, `delete ${JSON.stringify(key.slice(0, 20))}`);
    }
    for (const prefix of ['../', 'a/../../', '/abs/', 'no-slash', '..']) {
      await t.rejects(store.put(Readable.from([Buffer.from('x')]), { prefix }), InvalidBlobKeyError, `put prefix ${JSON.stringify(prefix)}`);
    }
    for (const prefix of ['../', '../x', 'a/../', '/']) {
      await t.rejects(store.list(prefix), InvalidBlobKeyError, `list prefix ${JSON.stringify(prefix)}`);
    }
  });
}

t.test('keys made within one millisecond, or while the clock stands still or goes back, sort in the order they were made', async (t) => {
  const at = 1_795_000_000_000;
  const keys = [newBlobKey('k/', at), newBlobKey('k/', at), newBlobKey('k/', at), newBlobKey('k/', at - 5), newBlobKey('k/', at + 1), newBlobKey('k/', at + 1)];
  t.same([...keys].sort(), keys, 'sorted is made order');
  t.equal(new Set(keys).size, keys.length, 'each key once');
  for (const key of keys) t.match(key, /^k\/[0-9a-f]{32}$/);
});

t.test('filesystem blob store', async (t) => {
  const parent = mkdtempSync(join(tmpdir(), 'svc-blobs-'));
  t.teardown(() => rmSync(parent, { recursive: true, force: true }));
  const root = join(parent, 'blobs');
  // A file next to the root that a traversal would reach.
  writeFileSync(join(parent, 'outside'), 'not yours');
  const store = new FilesystemBlobStore(root);
  blobContract(t, store);

  t.test('files are private to the service and no temporary file outlives a put', async (t) => {
    const info = await store.put(Readable.from([Buffer.from('private')]), { prefix: 'mode/' });
    t.equal(statSync(join(root, 'data', info.key)).mode & 0o777, 0o600);
    await t.rejects(store.put(pieces(randomBytes(1000), 100), { maxBytes: 10 }), BlobTooLargeError);
    t.same(readdirSync(join(root, 'tmp')), []);
  });

  t.test('within a transaction it is the same store: not transactional', async (t) => {
    t.equal(store.within({ query: () => Promise.reject(new Error('no database here')) }), store);
  });

  t.test('the sweep deletes temporary files a crashed put left over a day ago, and nothing else', async (t) => {
    const whole = await store.put(Readable.from([Buffer.from('kept')]), { prefix: 'sweep/' });
    const tmp = join(root, 'tmp');
    mkdirSync(tmp, { recursive: true });
    writeFileSync(join(tmp, 'abandoned.data'), 'half');
    const dayAndAMinuteAgo = new Date(Date.now() - 24 * 3_600_000 - 60_000);
    utimesSync(join(tmp, 'abandoned.data'), dayAndAMinuteAgo, dayAndAMinuteAgo);
    writeFileSync(join(tmp, 'in-progress.data'), 'still coming');
    t.equal(await store.sweepAbandoned(), 1);
    t.same(readdirSync(tmp), ['in-progress.data']);
    t.ok(await store.head(whole.key), 'whole blobs are untouched');
    rmSync(join(tmp, 'in-progress.data'));
  });

  t.test('nothing was written outside the root', async (t) => {
    t.same(readdirSync(parent).sort(), ['blobs', 'outside']);
  });
});

for (const backend of databaseBackends()) {
  t.test(`database blob store on ${backend.name}`, async (t) => {
    const { db, cleanup } = await backend.create();
    t.teardown(cleanup);
    await runMigrations(db, coreMigrations);
    const store = new SqlBlobStore(db);
    blobContract(t, store);

    t.test('a put within a transaction commits with it, and vanishes when it rolls back', async (t) => {
      // On PGlite a query outside the open transaction would wait for it: a put here proves it goes through tx.
      const committed = await db.transaction(async (tx) => {
        const info = await store.within(tx).put(pieces(Buffer.from('kept with the row')), { prefix: 'within/' });
        t.ok((await readAll((await store.within(tx).get(info.key))!.stream)).equals(Buffer.from('kept with the row')), 'readable inside tx');
        return info;
      });
      t.same(await store.head(committed.key), committed, 'visible once committed');
      let rolledBack = '';
      await t.rejects(
        db.transaction(async (tx) => {
          rolledBack = (await store.within(tx).put(pieces(randomBytes(300_000)), { prefix: 'within/' })).key;
          throw new Error('the caller fails');
        }),
        /the caller fails/,
      );
      t.equal(await store.head(rolledBack), null, 'gone with the rollback');
      t.same((await db.query('SELECT 1 FROM blob_chunks WHERE blob_key = $1', [rolledBack])).rows, [], 'chunks too');
    });

    t.test('the sweep deletes the rows a crashed put left over a day ago, and nothing else', async (t) => {
      const whole = await store.put(Readable.from([Buffer.from('kept')]), { prefix: 'sweep/' });
      await db.query("INSERT INTO blobs (key, content_type, chunk_size, created_at) VALUES ('sweep/old', 'x', 1, now() - interval '25 hours'), ('sweep/new', 'x', 1, now())");
      await db.query("INSERT INTO blob_chunks (blob_key, seq, data) VALUES ('sweep/old', 0, '\\x00')");
      t.equal(await store.sweepAbandoned(), 1);
      const { rows } = await db.query<{ key: string }>("SELECT key FROM blobs WHERE key LIKE 'sweep/%' ORDER BY key");
      t.same(rows.map((row) => row.key).sort(), [whole.key, 'sweep/new'].sort());
      t.same((await db.query("SELECT 1 FROM blob_chunks WHERE blob_key = 'sweep/old'")).rows, [], 'its chunks went with it');
    });
  });
}
