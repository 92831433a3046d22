import { existsSync, statSync, writeFileSync } from 'node:fs';
import t from 'tap';
import { clusterImageFile, clusterImageWritten, createPgliteDatabase } from '../../adapters/pglite/pglite-database.ts';

/**
 * Test suites start many in-memory databases, one process per test file: the first initialised
 * cluster is kept on disk (under node_modules/.cache) so later processes load it instead of
 * running initdb. This file runs in its own process, so its first database is the one that reads
 * the cache.
 */
t.test('the cluster image is cached on disk under the installed dependencies, named for the PGlite version', async (t) => {
  const file = clusterImageFile();
  t.ok(file, 'a cache file name');
  t.match(file!, /node_modules\/\.cache\/svc-pglite\/cluster-\d+\.\d+\.\d+-[0-9a-f]{12}\.tar$/);
});

t.test('a damaged cached image is ignored: the database still opens, and a whole image replaces the file', async (t) => {
  const file = clusterImageFile()!;
  writeFileSync(file, 'not a tar file');
  const db = await createPgliteDatabase({ reuseClusterImage: true });
  t.teardown(() => db.close());
  t.same((await db.query<{ one: number }>('SELECT 1 AS one')).rows, [{ one: 1 }]);
  // The image is written after the database opened.
  await clusterImageWritten();
  const size = existsSync(file) ? statSync(file).size : 0;
  t.ok(size > 1_000_000, `the cache holds a whole cluster image again (${size} bytes)`);
  const second = await createPgliteDatabase({ reuseClusterImage: true });
  t.teardown(() => second.close());
  t.same((await second.query<{ one: number }>('SELECT 1 AS one')).rows, [{ one: 1 }], 'a second database opens from it');
});
