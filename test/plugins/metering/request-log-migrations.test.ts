import t from 'tap';
import { coreMigrations } from '../../../adapters/sql/core-migrations.ts';
import { migrationChecksum, runMigrations } from '../../../adapters/sql/migrator.ts';
import type { Database, Migration } from '../../../core/ports/database.ts';
import { meteringMigrations } from '../../../plugins/metering/metering-migrations.ts';
import { databaseBackends } from '../../helpers/databases.ts';

/**
 * The request log is metering's table: metering@1 creates it. Databases made before then got it
 * from the kernel's first migration (core@1), and must keep it, and its rows, whatever plugins
 * they had enabled. The former SQL of both migrations is rebuilt here from today's, and checked
 * against the checksums the migrations accept, so these tests migrate exactly what such a
 * database applied.
 */
const core1 = coreMigrations.find((m) => m.owner === 'core' && m.version === 1)!;
const metering1 = meteringMigrations.find((m) => m.version === 1)!;
const TABLE_START = '\n-- One row per gateway call, the request log';
const tableSql = metering1.sql.slice(metering1.sql.indexOf(TABLE_START), metering1.sql.indexOf('\n\n-- Every price set'));

/** The request log's DDL as core@1 had it: its own comment, no IF NOT EXISTS. */
const formerTableSql = `
-- One row per gateway call. Metering fills it; spend windows are read from it. key_id is not a
-- foreign key on purpose: deleting a key permanently keeps its usage history.
${tableSql
  .split('\n')
  .filter((line) => line !== '' && !line.startsWith('--'))
  .join('\n')
  .replace('CREATE TABLE IF NOT EXISTS', 'CREATE TABLE')
  .replaceAll('CREATE INDEX IF NOT EXISTS', 'CREATE INDEX')}
`;

const formerCore1: Migration = {
  ...core1,
  sql: core1.sql.replace(/(CREATE INDEX api_keys_org_project [^\n]*\n)/, `$1${formerTableSql}`),
  formerChecksums: [],
};
const formerMetering1: Migration = { ...metering1, sql: metering1.sql.replace(tableSql, '').replace(/^\n+/, '\n'), formerChecksums: [] };
const coreAsItWas = coreMigrations.map((m) => (m === core1 ? formerCore1 : m));
const meteringAsItWas = meteringMigrations.filter((m) => m.version <= 4).map((m) => (m === metering1 ? formerMetering1 : m));

async function tableExists(db: Database): Promise<boolean> {
  const { rows } = await db.query<{ found: string | null }>("SELECT to_regclass('request_logs')::text AS found");
  return rows[0]?.found !== null;
}

async function storedRows(db: Database): Promise<Array<{ id: string; cost_micros: string }>> {
  return (await db.query<{ id: string; cost_micros: string }>('SELECT id, cost_micros::text FROM request_logs ORDER BY id')).rows;
}

const insertRow = (db: Database) =>
  db.query("INSERT INTO request_logs (id, organization_id, endpoint, status_code, cost_micros) VALUES ('req_old', gen_random_uuid(), '/v1/chat/completions', 200, 42)");

t.test('the former SQL rebuilt here is what databases applied', async (t) => {
  t.ok(core1.formerChecksums?.includes(migrationChecksum(formerCore1.sql)), 'core@1');
  t.ok(metering1.formerChecksums?.includes(migrationChecksum(formerMetering1.sql)), 'metering@1');
});

for (const backend of databaseBackends()) {
  t.test(backend.name, async (t) => {
    t.test('a new database has no request log until metering creates it', async (t) => {
      const { db, cleanup } = await backend.create();
      t.teardown(cleanup);
      await runMigrations(db, coreMigrations);
      t.notOk(await tableExists(db), 'the kernel does not create it');
      await runMigrations(db, [...coreMigrations, ...meteringMigrations]);
      t.ok(await tableExists(db), 'metering does');
    });

    t.test('a database whose request log the kernel created keeps it and its rows; metering migrates it on', async (t) => {
      const { db, cleanup } = await backend.create();
      t.teardown(cleanup);
      await runMigrations(db, [...coreAsItWas, ...meteringAsItWas]);
      await insertRow(db);
      const { applied } = await runMigrations(db, [...coreMigrations, ...meteringMigrations]);
      t.same(
        applied.map((m) => `${m.owner}@${m.version}`),
        ['metering@5'],
        'only what is new runs',
      );
      t.same(await storedRows(db), [{ id: 'req_old', cost_micros: '42' }]);
      const { rows } = await db.query<{ web_searches: number }>("SELECT web_searches FROM request_logs WHERE id = 'req_old'");
      t.equal(rows[0]?.web_searches, 0, 'the unit columns are added with their defaults');
    });

    t.test('a database made by the kernel alone, metering enabled later, keeps its request log', async (t) => {
      const { db, cleanup } = await backend.create();
      t.teardown(cleanup);
      await runMigrations(db, coreAsItWas);
      await insertRow(db);
      const { applied } = await runMigrations(db, [...coreMigrations, ...meteringMigrations]);
      t.same(
        applied.map((m) => `${m.owner}@${m.version}`),
        meteringMigrations.map((m) => `${m.owner}@${m.version}`),
      );
      t.same(await storedRows(db), [{ id: 'req_old', cost_micros: '42' }], 'not re-created');
    });
  });
}
