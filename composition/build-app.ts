import type { FastifyInstance } from 'fastify';
import type { AppConfig } from '../config/schema.ts';
import { buildKernel, type AppOptions } from '../core/kernel/app.ts';
import type { KernelAdapters } from '../core/ports/kernel-adapters.ts';
import { coreMigrations } from '../adapters/sql/core-migrations.ts';
import { runMigrations } from '../adapters/sql/migrator.ts';
import { createBlobStore } from './create-blob-store.ts';
import { createCoordination } from './create-coordination.ts';
import { createDatabase } from './create-database.ts';
import { createMailer } from './create-mailer.ts';
import { sqlKernelStores } from './sql-kernel-stores.ts';

/**
 * The composition root: the one place that reads `storage` and `mail` in config and chooses the
 * adapters behind the kernel's ports, then hands them to the kernel (core/kernel/app.ts). main.ts, the
 * bench and the tests build the service here; nothing under core/ knows which adapters exist.
 */
export function buildApp(config: AppConfig, options: AppOptions): Promise<FastifyInstance> {
  return buildKernel(config, kernelAdaptersFor(config), options);
}

/** The adapters this configuration asks for; nothing is opened until the kernel opens it. */
function kernelAdaptersFor(config: AppConfig): KernelAdapters {
  return {
    openDatabase: () => createDatabase(config.storage.database),
    openCoordination: (db) => createCoordination(config.storage.coordination, db),
    blobs: (db) => createBlobStore(config.storage, db),
    mailer: (db) => createMailer(config.mail, db),
    migrations: coreMigrations,
    migrate: runMigrations,
    stores: sqlKernelStores,
  };
}
