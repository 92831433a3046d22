import type { BlobStore } from './blobs.ts';
import type { Coordination } from './coordination.ts';
import type { Database, Migration, Migrator, Queryable } from './database.ts';
import type { EventStore } from './events.ts';
import type { IdentityStoresFactory } from './identity.ts';
import type { Mailer } from './mail.ts';
import type { JobLeaseStore, JobQueueStore, PeriodicStore } from './queue.ts';
import type { LongRunningStore } from './long-running.ts';
import type { JobLogStore } from './job-logs.ts';
import type { SecretStore } from './secrets.ts';

/**
 * Everything the kernel needs from outside itself, already chosen (composition/ reads the config
 * and picks the drivers). The kernel knows only these ports, so a backend is added by writing an
 * adapter and choosing it in composition/, never by touching core/.
 *
 * Chosen, not yet opened: the kernel opens storage only once the plugins' config is known good,
 * owns what it opened from then on, and closes it with the app (or at once if building fails).
 */
export interface KernelAdapters {
  openDatabase(): Promise<Database>;
  /** Given the database: a store that can lose its data keeps its epoch there (StoreEpochRecord). */
  openCoordination(db: Database): Promise<Coordination>;
  /** File contents: on disk or in the database, per `storage.blobs`. */
  blobs(db: Database): BlobStore;
  /** Outgoing mail; closed with the app when the sender holds a connection (SMTP). */
  mailer(db: Database): Mailer & { close?(): void };
  /** The kernel's own tables, before any plugin's. */
  readonly migrations: readonly Migration[];
  readonly migrate: Migrator;
  readonly stores: KernelStores;
}

/** The kernel's stores, each built over the database (or a transaction) the kernel hands it. */
export interface KernelStores {
  readonly identity: IdentityStoresFactory;
  jobs(db: Database): JobQueueStore & JobLeaseStore;
  periodic(db: Database): PeriodicStore;
  events(db: Database): EventStore;
  secrets(db: Queryable): SecretStore;
  longRunning(db: Database): LongRunningStore;
  jobLogs(db: Database): JobLogStore;
}
