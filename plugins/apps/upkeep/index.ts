import type { FastifyInstance } from 'fastify';
import { GatewayCallsPoint } from '../../../core/gateway/gateway-calls.ts';
import { Tokens } from '../../../core/kernel/di-tokens.ts';
import type { PluginContext } from '../../../core/kernel/plugin.ts';
import type { AnyOperation } from '../../../core/operations/operations.ts';
import type { Transaction } from '../../../core/ports/database.ts';
import { blobPrefixErasure } from '../../../core/services/blob-prefix-erasure.ts';
import type { AppsConfig } from '../apps-config.ts';
import type { AppsHost } from '../apps-host.ts';
import type { AppRecord, AppsStore } from '../apps-store.ts';
import type { DeployHooks } from '../deploy-pipeline.ts';
import { autofixOperations } from './autofix-operations.ts';
import { egressOperations } from './egress-operations.ts';
import { failureMailHook, mailOperations } from './mail-operations.ts';
import { releaseHook, releaseOperations } from './release-operations.ts';
import { appStoragePrefix, mountPublicStorage, storageOperations } from './storage-operations.ts';
import { UpkeepStore } from './upkeep-store.ts';

export { upkeepConfigShape } from './upkeep-config.ts';
export { upkeepMigrations } from './upkeep-migrations.ts';

/** The blobs of an erased organisation's app files, deleted by a job once its erasure committed. */
export const appStorageErasure = blobPrefixErasure('apps.storage-erasure', appStoragePrefix);

/**
 * The app upkeep routes and hooks (README.md "Storage, release commands, fixes, mail, egress"),
 * wired by the apps plugin's index.ts: each function takes the plugin's context and its parts.
 */
export function upkeepParts(ctx: PluginContext<AppsConfig>, apps: { store: AppsStore; host: AppsHost }) {
  const { container, config } = ctx;
  const upkeep = new UpkeepStore(container.resolve(Tokens.Database));
  const blobs = container.resolve(Tokens.Blobs);
  const clock = container.resolve(Tokens.Clock);
  const identity = container.resolve(Tokens.Identity);
  const release = { store: apps.store, upkeep, host: apps.host, clock, timeoutMs: config.release.timeoutMs };
  return {
    operations(): AnyOperation[] {
      return [
        ...storageOperations({ store: apps.store, upkeep, blobs, clock, limits: config.storage }),
        ...releaseOperations(release),
        ...autofixOperations({
          store: apps.store,
          upkeep,
          blobs,
          clock,
          gateway: ctx.extensions.get(GatewayCallsPoint) ?? null,
          settings: config.autofix,
        }),
        ...mailOperations({ store: apps.store, upkeep, clock }),
        ...egressOperations({ store: apps.store, upkeep, identity, clock, alertBytesPerDay: config.egress.alertBytesPerDay }),
      ];
    },
    hooks(): DeployHooks {
      const mail = failureMailHook({
        store: apps.store,
        upkeep,
        mailer: container.resolve(Tokens.Mailer),
        identity,
        clock,
        logger: ctx.logger,
      });
      return { ...releaseHook(release), ...mail };
    },
    /** In the app deletion's transaction: its files' blobs go once it commits. */
    onAppDelete(tx: Transaction, app: AppRecord): Promise<() => Promise<void>> {
      return upkeep.forgetApp(tx, app.id, blobs);
    },
    eraser() {
      return appStorageErasure.eraser('apps.storage', container.resolve(Tokens.Jobs), (tx, organizationId) => upkeep.eraseObjects(tx, organizationId));
    },
    erasureQueue() {
      return appStorageErasure.handler(blobs);
    },
    routes(app: FastifyInstance) {
      mountPublicStorage(app, { upkeep, blobs });
    },
  };
}
