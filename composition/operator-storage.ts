import type { AppConfig } from '../config/schema.ts';
import type { z } from 'zod';
import { newJobOf } from '../core/jobs/job-queue.ts';
import type { QueueSpec } from '../core/jobs/queue-definitions.ts';
import type { Database, Migration, Queryable } from '../core/ports/database.ts';
import type { KernelStores } from '../core/ports/kernel-adapters.ts';
import type { MailOutbox, Mailer } from '../core/ports/mail.ts';
import { coreMigrations } from '../adapters/sql/core-migrations.ts';
import { SqlMailOutbox } from '../adapters/sql/mail-outbox.ts';
import { runMigrations } from '../adapters/sql/migrator.ts';
import { createDatabase } from './create-database.ts';
import { createMailer } from './create-mailer.ts';
import { sqlKernelStores } from './sql-kernel-stores.ts';

/**
 * What the operator CLI (cli.ts) works on, chosen from the same config the service reads: the
 * service's database migrated to the kernel's schema, the kernel's stores and mail over it. The
 * caller closes `db` when done.
 */
export interface OperatorStorage {
  readonly db: Database;
  readonly stores: KernelStores;
  /** The local outbox, whatever mail.driver says now: it lists what was kept there. */
  readonly outbox: MailOutbox;
  /** The configured sender (SMTP or the outbox); close it when done. */
  openMailer(): Mailer & { close?(): void };
  /** Applies a plugin's migrations, for commands on a plugin's tables (the service may not have run since it was enabled). */
  migrate(migrations: readonly Migration[]): Promise<void>;
  /**
   * Puts a job on the service's durable queue (in `db`, a transaction of the command's change): the
   * service's workers run it, now or when they next start. The CLI runs no worker itself.
   */
  enqueue<S extends z.ZodType>(db: Queryable, queue: QueueSpec<S>, payload: z.input<S>): Promise<void>;
}

export async function openOperatorStorage(config: AppConfig): Promise<OperatorStorage> {
  const db = await createDatabase(config.storage.database);
  try {
    await runMigrations(db, coreMigrations);
  } catch (error) {
    await db.close();
    throw error;
  }
  return {
    db,
    stores: sqlKernelStores,
    outbox: new SqlMailOutbox(db, config.mail.from),
    openMailer: () => createMailer(config.mail, db),
    migrate: async (migrations) => void (await runMigrations(db, migrations)),
    async enqueue(into, queue, payload) {
      await sqlKernelStores.jobs(db).enqueue(into, newJobOf(queue, payload, {}, new Date()));
    },
  };
}
