import type { KernelStores } from '../core/ports/kernel-adapters.ts';
import { SqlEventStore } from '../adapters/sql/event-store.ts';
import { sqlIdentityStores } from '../adapters/sql/identity-stores.ts';
import { SqlJobStore, SqlPeriodicStore } from '../adapters/sql/job-store.ts';
import { SqlLongRunningStore } from '../adapters/sql/long-running-store.ts';
import { SqlJobLogStore } from '../adapters/sql/job-log-store.ts';
import { SqlSecretStore } from '../adapters/sql/secret-store.ts';

/** The kernel's stores in SQL: one implementation, over the embedded database and PostgreSQL alike. */
export const sqlKernelStores: KernelStores = {
  identity: sqlIdentityStores,
  jobs: (db) => new SqlJobStore(db),
  periodic: (db) => new SqlPeriodicStore(db),
  events: (db) => new SqlEventStore(db),
  secrets: (db) => new SqlSecretStore(db),
  longRunning: (db) => new SqlLongRunningStore(db),
  jobLogs: (db) => new SqlJobLogStore(db),
};
