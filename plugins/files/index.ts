import { definePeriodic } from '../../core/jobs/queue-definitions.ts';
import { createToken } from '../../core/kernel/container.ts';
import { Tokens } from '../../core/kernel/di-tokens.ts';
import { OrganizationErasersPoint } from '../../core/kernel/organization-erasure.ts';
import { definePlugin, type PluginContext } from '../../core/kernel/plugin.ts';
import { GatewayFilesPoint } from '../../core/ports/files.ts';
import { mountFileRoutes } from './file-routes.ts';
import { FileStore } from './file-store.ts';
import { type FilesConfig, filesConfigSchema } from './files-config.ts';
import { filesEraser, filesErasureQueue } from './files-erasure.ts';
import { filesMigrations } from './files-migrations.ts';
import { StoredFiles } from './gateway-files.ts';
// Catalogues the codes this plugin answers with.
import './files-errors.ts';

export const FilesTokens = {
  Store: createToken<FileStore>('FileStore'),
  Files: createToken<StoredFiles>('StoredFiles'),
};

/** Expired files deleted per statement by the hourly sweep, so one run never holds a long lock. */
const EXPIRE_BATCH = 500;

function filesOf(ctx: PluginContext<FilesConfig>) {
  return { store: ctx.container.resolve(FilesTokens.Store), files: ctx.container.resolve(FilesTokens.Files) };
}

/**
 * Files of the /v1 surface: OpenAI's `/v1/files` (upload, list, retrieve, delete, content) for the
 * key's project, a `batch` file checked line by line as it is uploaded, contents streamed into the
 * blob store; and the GatewayFiles point through which the batches plugin reads its input files and
 * stores its output. plugins/files/README.md has the design.
 */
export const filesPlugin = definePlugin({
  name: 'files',
  description: 'Files of the /v1 surface: OpenAI-compatible upload, list, retrieve, delete and content; batch input checked line by line at upload',
  configSchema: filesConfigSchema,
  migrations: filesMigrations,
  register({ container, extensions, logger }) {
    const store = new FileStore(container.resolve(Tokens.Database));
    const files = new StoredFiles({ store, blobs: container.resolve(Tokens.Blobs), clock: container.resolve(Tokens.Clock), logger });
    container.bindValue(FilesTokens.Store, store);
    container.bindValue(FilesTokens.Files, files);
    extensions.provide(GatewayFilesPoint, files);
    extensions.contribute(OrganizationErasersPoint, filesEraser({ store, jobs: container.resolve(Tokens.Jobs) }));
  },
  async routes(app, ctx) {
    const { store, files } = filesOf(ctx);
    await mountFileRoutes(app, { store, files, clock: ctx.container.resolve(Tokens.Clock), config: ctx.config, maxLineBytes: ctx.appConfig.server.bodyLimitBytes });
  },
  queues: ({ container }) => [filesErasureQueue({ blobs: container.resolve(Tokens.Blobs) })],
  periodic: (ctx) => {
    const { store, files } = filesOf(ctx);
    const clock = ctx.container.resolve(Tokens.Clock);
    return [
      definePeriodic({
        name: 'files.expire',
        everyMs: 3_600_000,
        async run() {
          for (;;) {
            const expired = await store.deleteExpired(clock(), EXPIRE_BATCH);
            for (const file of expired) await files.discard(file.blobKey);
            if (expired.length < EXPIRE_BATCH) return;
          }
        },
      }),
    ];
  },
});
