import { GatewayCallsPoint } from '../../core/gateway/gateway-calls.ts';
import { Tokens } from '../../core/kernel/di-tokens.ts';
import { createToken } from '../../core/kernel/container.ts';
import { definePlugin } from '../../core/kernel/plugin.ts';
import { OrganizationErasersPoint } from '../../core/kernel/organization-erasure.ts';
import { assistantOperations } from './assistant-operations.ts';
import { supportConfigSchema } from './support-config.ts';
import { supportEraser, supportFilesErasureQueue } from './support-erasure.ts';
import { supportMigrations } from './support-migrations.ts';
import { requesterMail, supportActsQueue } from './support-notifications.ts';
import { supportOperations } from './support-operations.ts';
import { SupportStore } from './support-store.ts';

export const SupportTokens = {
  Store: createToken<SupportStore>('SupportStore'),
};

/**
 * Support requests and the account assistant (plugins/support/README.md). People open requests with
 * attachments and talk with support, who answer from the operator CLI (support-desk.ts); the
 * assistant answers questions about the account with the gateway's own models and the caller's
 * read-only operations as tools. The assistant's routes exist when the inference plugin serves the
 * gateway they call.
 */
export const supportPlugin = definePlugin({
  name: 'support',
  description: 'Support requests with attachments, answered by the operator; the account assistant, answering with the gateway and the caller’s read operations',
  configSchema: supportConfigSchema,
  migrations: supportMigrations,
  register({ container, extensions }) {
    const store = new SupportStore(container.resolve(Tokens.Database));
    container.bindValue(SupportTokens.Store, store);
    extensions.contribute(OrganizationErasersPoint, supportEraser({ store, jobs: container.resolve(Tokens.Jobs) }));
  },
  operations({ container, config, extensions }) {
    const operations = supportOperations({
      store: container.resolve(SupportTokens.Store),
      blobs: container.resolve(Tokens.Blobs),
      events: container.resolve(Tokens.Events),
      identity: container.resolve(Tokens.Identity),
      clock: container.resolve(Tokens.Clock),
      attachments: config.attachments,
    });
    const gateway = extensions.get(GatewayCallsPoint);
    if (!gateway) return operations;
    return [...operations, ...assistantOperations({ gateway, tools: container.resolve(Tokens.OperationTools), settings: config.assistant })];
  },
  queues: ({ container }) => [
    supportActsQueue({ store: container.resolve(SupportTokens.Store), events: container.resolve(Tokens.Events) }),
    supportFilesErasureQueue({ blobs: container.resolve(Tokens.Blobs) }),
  ],
  subscribers: ({ container, appConfig }) => [
    requesterMail({
      store: container.resolve(SupportTokens.Store),
      identity: container.resolve(Tokens.Identity),
      mailer: container.resolve(Tokens.Mailer),
      publicUrl: appConfig.server.publicUrl,
    }),
  ],
});
