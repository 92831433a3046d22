import { createPgliteDatabase } from '../../adapters/pglite/pglite-database.ts';
import { SqlCoordinationEpochs } from '../../adapters/sql/coordination-epochs.ts';
import { coreMigrations } from '../../adapters/sql/core-migrations.ts';
import { runMigrations } from '../../adapters/sql/migrator.ts';
import type { Database } from '../../core/ports/database.ts';
import type { TapLike } from './app.ts';

/**
 * The database's memory of coordination epochs for tests that open Redis coordination without an
 * app: one in-memory PGlite with only the core-coordination tables, closed on teardown. Instances
 * made by `epochsFor(prefix)` over one such database are replicas of one deployment. With
 * `migrated: false` the tables are made only by `migrate()`, as an app opens coordination before
 * it migrates.
 */
export async function coordinationEpochDatabase(
  t: TapLike,
  options: { migrated?: boolean } = {},
): Promise<{ db: Database; epochsFor(prefix: string): SqlCoordinationEpochs; migrate(): Promise<void> }> {
  const db = await createPgliteDatabase({ reuseClusterImage: true });
  t.teardown(() => db.close());
  const migrate = async () => {
    await runMigrations(
      db,
      coreMigrations.filter((migration) => migration.owner === 'core-coordination'),
    );
  };
  if (options.migrated !== false) await migrate();
  return { db, epochsFor: (prefix) => new SqlCoordinationEpochs(db, prefix), migrate };
}
