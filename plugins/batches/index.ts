import { GatewayCallsPoint } from '../../core/gateway/gateway-calls.ts';
import { InferenceAdmissionPoint } from '../../core/gateway/inference-admission.ts';
import { SpendHoldsPoint } from '../../core/gateway/spend-holds.ts';
import type { RecordKind } from '../../core/identity/authorization.ts';
import { definePeriodic } from '../../core/jobs/queue-definitions.ts';
import { Tokens } from '../../core/kernel/di-tokens.ts';
import { OrganizationErasersPoint } from '../../core/kernel/organization-erasure.ts';
import { definePlugin, type PluginContext } from '../../core/kernel/plugin.ts';
import { GatewayFilesPoint } from '../../core/ports/files.ts';
import { resourceId } from '../../core/vocabulary/ids.ts';
import { type BatchesConfig, batchesConfigSchema } from './batch-config.ts';
import { finalizeBatch } from './batch-finalizer.ts';
import { batchMigrations } from './batch-migrations.ts';
import { batchOperations } from './batch-operations.ts';
import { batchQueues } from './batch-queues.ts';
import { registerBatchRoutes } from './batch-routes.ts';
import { stopBatch } from './batch-stops.ts';
import { type Batch, BatchStore } from './batch-store.ts';
import { runLine } from './line-runner.ts';
import { OrganizationTurns } from './organization-turns.ts';
// Catalogues the codes and event types this plugin answers with and emits.
import './batch-errors.ts';
import './batch-events.ts';

/** Overdue batches stopped per run of the expiry sweep. */
const EXPIRY_SWEEP = 100;

function batchKindOf(store: BatchStore): RecordKind<Batch> {
  return {
    name: 'batch',
    notFound: 'batch_not_found',
    async find(organizationId, id) {
      if (!resourceId.safeParse(id).success) return null;
      const batch = await store.find(organizationId, id);
      return batch && { record: batch, projectId: batch.projectId };
    },
  };
}

/** What every part of the plugin is built from, resolved once per call of a plugin hook. */
function depsOf(ctx: PluginContext<BatchesConfig>) {
  const { container, extensions, config } = ctx;
  const database = container.resolve(Tokens.Database);
  const gateway = extensions.get(GatewayCallsPoint);
  const files = extensions.get(GatewayFilesPoint);
  if (!gateway || !files) throw new Error('the batches plugin needs the inference and files plugins: enable them too');
  const authenticator = container.resolve(Tokens.Authenticator);
  return {
    database,
    store: new BatchStore(database),
    files,
    gateway,
    holds: extensions.get(SpendHoldsPoint),
    jobs: container.resolve(Tokens.Jobs),
    queues: batchQueues(config),
    events: container.resolve(Tokens.Events),
    coordination: container.resolve(Tokens.Coordination),
    keyCredential: (keyId: string) => authenticator.keyCredentialById(keyId),
    clock: container.resolve(Tokens.Clock),
    config,
    maxLineBytes: ctx.appConfig.server.bodyLimitBytes,
  };
}

/**
 * Batches (OpenAI's /v1/batches): a file of calls checked and priced at submission, its worst case
 * held against the balance and caps, each line run through the gateway call path as a durable job,
 * and the answers written as output and error files. plugins/batches/README.md has the design.
 */
export const batchesPlugin = definePlugin({
  name: 'batches',
  description: 'Batches: files of gateway calls run in the background against a spend hold, answered as output files',
  dependsOn: ['inference', 'files'],
  configSchema: batchesConfigSchema,
  migrations: batchMigrations,
  register(ctx) {
    const store = new BatchStore(ctx.container.resolve(Tokens.Database));
    ctx.extensions.contribute(OrganizationErasersPoint, { name: 'batches', erase: (tx, organizationId) => store.eraseForOrganization(tx, organizationId) });
  },
  operations: (ctx) => {
    const deps = depsOf(ctx);
    return batchOperations({ ...deps, identity: ctx.container.resolve(Tokens.Identity), batchKind: batchKindOf(deps.store) });
  },
  queues: (ctx) => {
    const deps = depsOf(ctx);
    const { queues, holds, config } = deps;
    // One per process: lines waiting for their organisation's turn are woken by this process's lines
    // ending. A turn outlives a dead worker by the line's timeout and a margin, then frees itself.
    const turns = new OrganizationTurns(deps.coordination, config.perOrganizationConcurrency, config.lineTimeoutMs + 30_000);
    return [
      queues.line.handle((job) => runLine({ ...deps, turns }, job)),
      queues.finalize.handle((job) => finalizeBatch(deps, job)),
      queues.releaseHold.handle(async (job) => {
        await holds?.release(job.payload.holdId);
      }),
    ];
  },
  periodic: (ctx) => {
    const deps = depsOf(ctx);
    return [
      definePeriodic({
        name: 'batches.expire',
        everyMs: 60_000,
        async run() {
          for (const id of await deps.store.overdue(deps.clock(), EXPIRY_SWEEP)) {
            const batch = await deps.store.get(id);
            if (batch) await stopBatch(deps, batch, 'expired');
          }
        },
      }),
    ];
  },
  routes(app, ctx) {
    const deps = depsOf(ctx);
    registerBatchRoutes(app, { ...deps, batchKind: batchKindOf(deps.store), admission: ctx.extensions.get(InferenceAdmissionPoint) });
  },
});
