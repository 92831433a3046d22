import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import pg from 'pg';
import t from 'tap';
import { CheckViolation, DatabaseError, DatabaseUnavailable, ForeignKeyViolation, UniqueViolation, type Database, type Migration } from '../../core/ports/database.ts';
import { createDatabase } from '../../composition/create-database.ts';
import { createPgDatabase } from '../../adapters/pg/pg-database.ts';
import { lockKeyFor, MigrationError, migrationChecksum, runMigrations } from '../../adapters/sql/migrator.ts';
import { createSharedPgSchema, databaseBackends, type DatabaseBackend } from '../helpers/databases.ts';

interface HasTeardown {
  teardown(fn: () => unknown): void;
}

async function open(backend: DatabaseBackend, t: HasTeardown): Promise<Database> {
  const { db, cleanup } = await backend.create();
  t.teardown(cleanup);
  return db;
}

function deferred(): { promise: Promise<void>; resolve(): void } {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
}

const BIG = 2n ** 60n + 7n; // well above Number.MAX_SAFE_INTEGER

for (const backend of databaseBackends()) {
  t.test(backend.name, async (t) => {
    t.test('parameters, rows and rowCount', async (t) => {
      const db = await open(backend, t);
      t.equal(db.kind, backend.name);
      await db.query('CREATE TABLE item (id int PRIMARY KEY, label text, flag boolean, meta jsonb)');
      const insert = await db.query('INSERT INTO item VALUES ($1, $2, $3, $4), ($5, $6, $7, $8)', [1, 'one', true, JSON.stringify({ a: 1 }), 2, null, false, null]);
      t.equal(insert.rowCount, 2);
      const { rows, rowCount } = await db.query<{ id: number; label: string | null; flag: boolean; meta: unknown }>('SELECT id, label, flag, meta FROM item ORDER BY id');
      t.equal(rowCount, 2);
      t.same(rows, [
        { id: 1, label: 'one', flag: true, meta: { a: 1 } },
        { id: 2, label: null, flag: false, meta: null },
      ]);
      t.equal((await db.query('UPDATE item SET flag = NOT flag')).rowCount, 2);
      t.equal((await db.query('DELETE FROM item WHERE id = $1', [99])).rowCount, 0);
      t.same((await db.query('SELECT $1::text AS v', ['it\'s "quoted"'])).rows, [{ v: 'it\'s "quoted"' }]);
    });

    t.test('query() is one statement on every backend', async (t) => {
      const db = await open(backend, t);
      await t.rejects(db.query('SELECT 1; SELECT 2'));
    });

    t.test('bigint round-trips as parameter and column', async (t) => {
      const db = await open(backend, t);
      await db.query('CREATE TABLE ledger (id int PRIMARY KEY, micros bigint NOT NULL)');
      await db.query('INSERT INTO ledger VALUES (1, $1), (2, $2)', [BIG, -BIG]);
      const { rows } = await db.query<{ micros: bigint }>('SELECT micros FROM ledger ORDER BY id');
      t.same(
        rows.map((r) => r.micros),
        [BIG, -BIG],
      );
      t.equal(typeof rows[0]?.micros, 'bigint');
      const sum = await db.query<{ total: bigint; one: bigint; many: bigint[] }>(
        'SELECT sum(micros)::bigint + $1::bigint AS total, 1::int8 AS one, ARRAY[$2::int8, NULL, 3] AS many FROM ledger',
        [1n, BIG],
      );
      t.equal(sum.rows[0]?.total, 1n);
      t.equal(sum.rows[0]?.one, 1n);
      t.same(sum.rows[0]?.many, [BIG, null, 3n]);
    });

    t.test('timestamptz comes back as Date', async (t) => {
      const db = await open(backend, t);
      const at = new Date('2024-02-29T12:34:56.789Z');
      const { rows } = await db.query<{ now: unknown; at: unknown }>('SELECT now() AS now, $1::timestamptz AS at', [at]);
      t.ok(rows[0]?.now instanceof Date);
      t.ok(rows[0]?.at instanceof Date);
      t.equal((rows[0]!.at as Date).getTime(), at.getTime());
    });

    t.test('transaction commits, and rolls back on throw', async (t) => {
      const db = await open(backend, t);
      await db.query('CREATE TABLE note (body text)');
      const value = await db.transaction(async (tx) => {
        await tx.query('INSERT INTO note VALUES ($1)', ['kept']);
        return (await tx.query<{ n: bigint }>('SELECT count(*) AS n FROM note')).rows[0]?.n;
      });
      t.equal(value, 1n, 'tx sees its own writes; the callback result is returned');

      const boom = new Error('boom');
      await t.rejects(
        db.transaction(async (tx) => {
          await tx.query('INSERT INTO note VALUES ($1)', ['discarded']);
          throw boom;
        }),
        boom,
        'the original error is rethrown',
      );
      const { rows } = await db.query<{ body: string }>('SELECT body FROM note');
      t.same(rows, [{ body: 'kept' }]);
    });

    t.test('constraint failures arrive as typed errors naming the constraint, the driver error as cause', async (t) => {
      const db = await open(backend, t);
      await db.query('CREATE TABLE parent (id int PRIMARY KEY, name text NOT NULL, size int CONSTRAINT parent_size_positive CHECK (size > 0))');
      await db.query('CREATE UNIQUE INDEX parent_name_key ON parent (lower(name))');
      await db.query('CREATE TABLE child (parent_id int CONSTRAINT child_parent_fk REFERENCES parent(id))');
      await db.query("INSERT INTO parent VALUES (1, 'one', 1)");

      const duplicate = await db.query("INSERT INTO parent VALUES (2, 'ONE', 1)").catch((error: unknown) => error);
      t.ok(duplicate instanceof UniqueViolation, 'a duplicate is a UniqueViolation');
      t.equal((duplicate as UniqueViolation).constraint, 'parent_name_key');
      t.ok((duplicate as Error).cause instanceof Error, 'the driver error is kept as cause');
      t.equal((duplicate as UniqueViolation).sqlState, '23505');

      const primaryKey = await db.transaction((tx) => tx.query("INSERT INTO parent VALUES (1, 'other', 1)")).catch((error: unknown) => error);
      t.ok(primaryKey instanceof UniqueViolation, 'inside a transaction too');
      t.equal((primaryKey as UniqueViolation).constraint, 'parent_pkey');

      const orphan = await db.query('INSERT INTO child VALUES (9)').catch((error: unknown) => error);
      t.ok(orphan instanceof ForeignKeyViolation, 'a missing parent is a ForeignKeyViolation');
      t.equal((orphan as ForeignKeyViolation).constraint, 'child_parent_fk');
      await db.query('INSERT INTO child VALUES (1)');
      const inUse = await db.query('DELETE FROM parent WHERE id = 1').catch((error: unknown) => error);
      t.ok(inUse instanceof ForeignKeyViolation, 'deleting a referenced row too');

      const check = await db.query("INSERT INTO parent VALUES (3, 'three', 0)").catch((error: unknown) => error);
      t.ok(check instanceof CheckViolation, 'a CHECK refusal is a CheckViolation');
      t.equal((check as CheckViolation).constraint, 'parent_size_positive');

      const syntax = await db.query('SELEC 1').catch((error: unknown) => error);
      t.notOk(syntax instanceof DatabaseError, 'other errors pass through as the driver raised them');

      const callbackError = new Error('mine');
      await t.rejects(
        db.transaction(async () => Promise.reject(callbackError)),
        callbackError,
        "the callback's own error is not translated",
      );
    });

    t.test('a closed database is DatabaseUnavailable', async (t) => {
      const { db, cleanup } = await backend.create();
      t.teardown(cleanup);
      await db.close();
      await t.rejects(db.query('SELECT 1'), DatabaseUnavailable);
      await t.rejects(
        db.transaction(async () => undefined),
        DatabaseUnavailable,
      );
    });

    t.test('a failed statement whose error was swallowed makes COMMIT fail', async (t) => {
      const db = await open(backend, t);
      await db.query('CREATE TABLE one_row (id int PRIMARY KEY)');
      await t.rejects(
        db.transaction(async (tx) => {
          await tx.query('INSERT INTO one_row VALUES (1)');
          await tx.query('INSERT INTO one_row VALUES (1)').catch(() => undefined);
        }),
        { code: '25P02' },
      );
      t.same((await db.query('SELECT id FROM one_row')).rows, []);
    });

    t.test('a query outside an open transaction neither sees nor joins it', async (t) => {
      const db = await open(backend, t);
      await db.query('CREATE TABLE event (source text)');
      const events: string[] = [];
      let outsideRead: Promise<bigint | undefined> | undefined;
      let outsideWrite: Promise<unknown> | undefined;
      await t.rejects(
        db.transaction(async (tx) => {
          await tx.query("INSERT INTO event VALUES ('tx')");
          outsideRead = db.query<{ n: bigint }>("SELECT count(*) AS n FROM event WHERE source = 'tx'").then((r) => {
            events.push('outside-read-done');
            return r.rows[0]?.n;
          });
          outsideWrite = db.query("INSERT INTO event VALUES ('outside')");
          if (backend.name === 'pglite') {
            // One session, queries served in turn: were the transaction not holding it, the two
            // queries issued above would be served before this one.
            await tx.query('SELECT 1');
          } else {
            // Other connections: both finish while the transaction is still open.
            await Promise.all([outsideRead, outsideWrite]);
          }
          events.push('tx-ending');
          throw new Error('roll back');
        }),
      );
      t.equal(await outsideRead, 0n, 'the uncommitted (then rolled back) row was never visible outside');
      await outsideWrite;
      const { rows } = await db.query<{ source: string }>('SELECT source FROM event');
      t.same(rows, [{ source: 'outside' }], 'the outside write was not swept into the rolled-back transaction');
      if (backend.name === 'pglite') {
        t.same(events, ['tx-ending', 'outside-read-done'], 'on the single PGlite session the outside query waited');
      }
    });

    t.test('concurrent read-modify-write transactions lose no update', async (t) => {
      const db = await open(backend, t);
      await db.query('CREATE TABLE counter (id int PRIMARY KEY, n int NOT NULL)');
      await db.query('INSERT INTO counter VALUES (1, 0)');
      await Promise.all(
        Array.from({ length: 50 }, () =>
          db.transaction(async (tx) => {
            await tx.query('UPDATE counter SET n = n + 1 WHERE id = 1');
            await tx.query('SELECT n FROM counter WHERE id = 1');
          }),
        ),
      );
      t.same((await db.query('SELECT n FROM counter')).rows, [{ n: 50 }]);
    });

    t.test('migrator', async (t) => {
      const migrations: Migration[] = [
        { owner: 'core', version: 2, name: 'add-price', sql: "ALTER TABLE model ADD COLUMN price bigint; INSERT INTO trail VALUES ('core2');" },
        { owner: 'core', version: 1, name: 'init', sql: "CREATE TABLE model (id text PRIMARY KEY);\nCREATE TABLE trail (step text);\nINSERT INTO trail VALUES ('core1');" },
        { owner: 'plugin-x', version: 1, name: 'x-init', sql: "CREATE TABLE x_thing (model text REFERENCES model(id)); INSERT INTO trail VALUES ('x1');" },
        { owner: 'core', version: 3, name: 'seed', sql: "INSERT INTO model VALUES ('gpt', 5); INSERT INTO trail VALUES ('core3');" },
      ];

      t.test('applies owners in first-appearance order, versions ascending; second run is a no-op', async (t) => {
        const db = await open(backend, t);
        const first = await runMigrations(db, migrations);
        t.same(first.applied, [
          { owner: 'core', version: 1, name: 'init' },
          { owner: 'core', version: 2, name: 'add-price' },
          { owner: 'core', version: 3, name: 'seed' },
          { owner: 'plugin-x', version: 1, name: 'x-init' },
        ]);
        t.same(
          (await db.query('SELECT step FROM trail')).rows.map((r) => r.step),
          ['core1', 'core2', 'core3', 'x1'],
        );
        const recorded = await db.query<{ owner: string; version: number; checksum: string; applied_at: unknown }>(
          'SELECT owner, version, checksum, applied_at FROM schema_migrations ORDER BY owner, version',
        );
        t.equal(recorded.rowCount, 4);
        t.ok(recorded.rows.every((r) => /^[0-9a-f]{64}$/.test(r.checksum) && r.applied_at instanceof Date));

        const second = await runMigrations(db, migrations);
        t.same(second.applied, []);
        t.equal((await db.query('SELECT step FROM trail')).rowCount, 4);

        const more = await runMigrations(db, [...migrations, { owner: 'core', version: 4, name: 'later', sql: "INSERT INTO trail VALUES ('core4')" }]);
        t.same(more.applied, [{ owner: 'core', version: 4, name: 'later' }]);
      });

      t.test('a failing migration leaves nothing behind and names itself', async (t) => {
        const db = await open(backend, t);
        const broken: Migration = {
          owner: 'plugin-y',
          version: 7,
          name: 'half-done',
          sql: 'CREATE TABLE y_partial (id int); SELECT * FROM no_such_table;',
        };
        const err = await runMigrations(db, [migrations[1]!, broken]).then(
          () => undefined,
          (e: unknown) => e,
        );
        t.ok(err instanceof MigrationError);
        const me = err as MigrationError;
        t.match(me.message, /plugin-y@7 \(half-done\)/);
        t.match(me.message, /no_such_table/);
        t.same([me.owner, me.version, me.migrationName], ['plugin-y', 7, 'half-done']);
        t.ok(me.cause instanceof Error, 'the driver error is kept as cause');
        const leftovers = await db.query("SELECT 1 FROM information_schema.tables WHERE table_name = 'y_partial'");
        t.equal(leftovers.rowCount, 0, 'the first statement of the failed migration was rolled back');
        const recorded = await db.query<{ owner: string; version: number }>('SELECT owner, version FROM schema_migrations');
        t.same(recorded.rows, [{ owner: 'core', version: 1 }], 'earlier migrations of the run stay applied');
      });

      t.test('a changed checksum of an applied migration is refused', async (t) => {
        const db = await open(backend, t);
        await runMigrations(db, [migrations[1]!]);
        const edited = { ...migrations[1]!, sql: `${migrations[1]!.sql}\n-- tweak` };
        await t.rejects(runMigrations(db, [edited, migrations[0]!]), {
          name: 'MigrationError',
          message: /core@1 \(init\) was already applied with different SQL/,
        });
        t.equal((await db.query('SELECT 1 FROM schema_migrations WHERE version = 2')).rowCount, 0, 'nothing else ran');
      });

      t.test('an applied migration whose SQL moved in part to another owner is accepted under its former checksum, not run again', async (t) => {
        const db = await open(backend, t);
        await runMigrations(db, [migrations[1]!]);
        const split = { ...migrations[1]!, sql: "CREATE TABLE model (id text PRIMARY KEY);\nCREATE TABLE trail (step text);\nINSERT INTO trail VALUES ('core1');\n-- split" };
        const tweaked = { ...split, formerChecksums: ['0'.repeat(64)] };
        await t.rejects(runMigrations(db, [tweaked]), { name: 'MigrationError' }, 'another former checksum does not do');
        const moved = { ...split, formerChecksums: [migrationChecksum(migrations[1]!.sql)] };
        t.same((await runMigrations(db, [moved, migrations[0]!])).applied, [{ owner: 'core', version: 2, name: 'add-price' }]);
        t.same(
          (await db.query('SELECT step FROM trail')).rows.map((r) => r.step),
          ['core1', 'core2'],
          'core@1 did not run again',
        );
      });

      t.test('refuses a version below one already applied, and duplicates', async (t) => {
        const db = await open(backend, t);
        await runMigrations(
          db,
          [migrations[1]!, migrations[3]!].map((m) => (m.version === 3 ? { ...m, sql: 'SELECT 1' } : m)),
        );
        await t.rejects(
          runMigrations(
            db,
            migrations.map((m) => (m.version === 3 ? { ...m, sql: 'SELECT 1' } : m)),
          ),
          {
            message: /core@2 \(add-price\) is not applied but core@3 already is/,
          },
        );
        await t.rejects(runMigrations(db, [migrations[1]!, migrations[1]!]), { message: /listed twice/ });
      });
    });

    if (backend.name === 'postgres') {
      t.test('two replicas migrating the same schema at once apply each migration exactly once', async (t) => {
        const shared = await createSharedPgSchema();
        t.teardown(shared.cleanup);
        const replicas = await Promise.all([createPgDatabase(shared.options), createPgDatabase(shared.options)]);
        t.teardown(() => Promise.all(replicas.map((r) => r.close())));
        const plan: Migration[] = [
          { owner: 'core', version: 1, name: 'init', sql: 'CREATE TABLE ran (name text); SELECT pg_sleep(0.05);' },
          ...[2, 3, 4, 5].map((v) => ({ owner: 'core', version: v, name: `m${v}`, sql: `INSERT INTO ran VALUES ('m${v}'); SELECT pg_sleep(0.02);` })),
          { owner: 'plugin', version: 1, name: 'p1', sql: "CREATE TABLE p (x int); INSERT INTO ran VALUES ('p1');" },
        ];
        const results = await Promise.all(replicas.map((db) => runMigrations(db, plan)));
        const appliedCount = results.reduce((n, r) => n + r.applied.length, 0);
        t.equal(appliedCount, plan.length, 'every migration is reported applied by exactly one replica');
        const ran = await replicas[0]!.query<{ name: string; n: bigint }>('SELECT name, count(*) AS n FROM ran GROUP BY name ORDER BY name');
        t.same(
          ran.rows,
          ['m2', 'm3', 'm4', 'm5', 'p1'].map((name) => ({ name, n: 1n })),
        );
      });

      t.test("pg's process-wide type parsers are left alone", async (t) => {
        await open(backend, t);
        const url = process.env.TEST_PG_URL!;
        const plain = new pg.Client({ connectionString: url });
        await plain.connect();
        t.teardown(() => plain.end());
        t.same((await plain.query('SELECT 9007199254740993::int8 AS v')).rows, [{ v: '9007199254740993' }]);
      });

      t.test('a connection killed by the server fails only its own work, never the process', async (t) => {
        const shared = await createSharedPgSchema();
        t.teardown(shared.cleanup);
        const seen: Error[] = [];
        const firstError = deferred();
        const db = await createPgDatabase({
          ...shared.options,
          poolSize: 1,
          onConnectionError: (err) => {
            seen.push(err);
            firstError.resolve();
          },
        });
        t.teardown(() => db.close());
        const killer = await createPgDatabase({ url: shared.options.url, poolSize: 1 });
        t.teardown(() => killer.close());
        const pidOf = async (q: { query: Database['query'] }) => (await q.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;

        // idle in the pool
        const idlePid = await pidOf(db);
        await killer.query('SELECT pg_terminate_backend($1)', [idlePid]);
        await firstError.promise;
        t.equal(seen.length, 1, 'the idle-connection error reached the listener');
        t.same((await db.query('SELECT 1 AS ok')).rows, [{ ok: 1 }], 'the pool replaced the dead connection');

        // checked out by a transaction that is awaiting something else
        await t.rejects(
          db.transaction(async (tx) => {
            // With a timeout, pg_terminate_backend returns once the backend has exited (PostgreSQL 14+).
            await killer.query('SELECT pg_terminate_backend($1, 10000)', [await pidOf(tx)]);
            await tx.query('SELECT 1');
          }),
        );
        t.same((await db.query('SELECT 2 AS ok')).rows, [{ ok: 2 }], 'the broken connection was not returned to the pool');
      });

      t.test('runners in different schemas do not share a lock', async (t) => {
        t.not(lockKeyFor(1n, 't_a'), lockKeyFor(1n, 't_b'));
        t.equal(lockKeyFor(1, 't_a'), lockKeyFor(1n, 't_a'));
      });

      t.test('FOR UPDATE SKIP LOCKED hands two transactions different rows', async (t) => {
        const db = await open(backend, t);
        await db.query('CREATE TABLE job (id int PRIMARY KEY)');
        await db.query('INSERT INTO job VALUES (1), (2), (3)');
        const claim = 'SELECT id FROM job ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED';
        const firstHolds = deferred();
        const release = deferred();
        const first = db.transaction(async (tx) => {
          const { rows } = await tx.query<{ id: number }>(claim);
          firstHolds.resolve();
          await release.promise;
          return rows[0]?.id;
        });
        await firstHolds.promise;
        const second = await db.transaction(async (tx) => (await tx.query<{ id: number }>(claim)).rows[0]?.id);
        release.resolve();
        t.equal(await first, 1);
        t.equal(second, 2);
      });
    }
  });
}

t.test('pglite with a data directory persists across instances', async (t) => {
  const dir = await mkdtemp(path.join(tmpdir(), 'pglite-contract-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const dataDir = path.join(dir, 'nested', 'data');
  const first = await createDatabase({ driver: 'pglite', dataDir });
  try {
    await first.query('CREATE TABLE kept (micros bigint)');
    await first.query('INSERT INTO kept VALUES ($1)', [BIG]);
  } finally {
    await first.close();
  }
  const second = await createDatabase({ driver: 'pglite', dataDir });
  t.teardown(() => second.close());
  t.equal(second.kind, 'pglite');
  t.same((await second.query('SELECT micros FROM kept')).rows, [{ micros: BIG }]);
});
