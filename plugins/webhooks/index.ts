import { definePeriodic } from '../../core/jobs/queue-definitions.ts';
import { Tokens } from '../../core/kernel/di-tokens.ts';
import { definePlugin, type PluginContext } from '../../core/kernel/plugin.ts';
import { OrganizationErasersPoint } from '../../core/kernel/organization-erasure.ts';
import { runDelivery } from './delivery-worker.ts';
import { deliveryQueue } from './delivery-queue.ts';
import { DeliveryStore } from './delivery-store.ts';
import { disabledMailSubscriber } from './disabled-mail.ts';
import { EndpointStore } from './endpoint-store.ts';
import { fanOutSubscriber } from './fan-out.ts';
import { type WebhooksConfig, webhooksConfigSchema } from './webhook-config.ts';
import { webhookMigrations } from './webhook-migrations.ts';
import { webhookErasers } from './webhook-erasure.ts';
import { webhookOperations } from './webhook-operations.ts';
// Catalogues the codes and event types this plugin answers with and emits.
import './webhook-errors.ts';
import './webhook-events.ts';

/** Deliveries deleted per statement by the prune, so one run never holds a long lock on a large table. */
const PRUNE_BATCH = 5_000;

function stores(ctx: PluginContext<WebhooksConfig>) {
  const database = ctx.container.resolve(Tokens.Database);
  return { database, endpoints: new EndpointStore(database), deliveries: new DeliveryStore(database) };
}

/**
 * Webhooks: endpoints customers register, a subscriber that turns every public event into one
 * delivery per subscribed endpoint, a durable queue that sends each (signed as Standard Webhooks
 * says, retried on a schedule), and the management operations. plugins/webhooks/README.md has the design.
 */
export const webhooksPlugin = definePlugin({
  name: 'webhooks',
  description: 'Webhooks: signed event deliveries to customer endpoints, retried on a schedule, every attempt kept',
  configSchema: webhooksConfigSchema,
  migrations: webhookMigrations,
  register(ctx) {
    const { endpoints, deliveries } = stores(ctx);
    const vault = ctx.container.resolve(Tokens.Secrets);
    for (const eraser of webhookErasers({ endpoints, deliveries, vault })) ctx.extensions.contribute(OrganizationErasersPoint, eraser);
  },
  operations: (ctx) => {
    const { container, config, appConfig } = ctx;
    const { endpoints, deliveries } = stores(ctx);
    return webhookOperations({
      endpoints,
      deliveries,
      identity: container.resolve(Tokens.Identity),
      vault: container.resolve(Tokens.Secrets),
      http: container.resolve(Tokens.OutboundHttp),
      jobs: container.resolve(Tokens.Jobs),
      queue: deliveryQueue(config),
      clock: container.resolve(Tokens.Clock),
      config,
      allowHttp: appConfig.outbound.allowPrivateNetwork,
    });
  },
  queues: (ctx) => {
    const { container, config } = ctx;
    const { database, endpoints, deliveries } = stores(ctx);
    const deps = {
      database,
      endpoints,
      deliveries,
      vault: container.resolve(Tokens.Secrets),
      http: container.resolve(Tokens.OutboundHttp),
      events: container.resolve(Tokens.Events),
      clock: container.resolve(Tokens.Clock),
      config,
    };
    return [deliveryQueue(config).handle((job) => runDelivery(deps, job))];
  },
  periodic: (ctx) => {
    const { deliveries } = stores(ctx);
    const clock = ctx.container.resolve(Tokens.Clock);
    return [
      definePeriodic({
        name: 'webhooks.prune',
        everyMs: 3_600_000,
        async run() {
          const before = new Date(clock().getTime() - ctx.config.retentionDays * 86_400_000);
          while ((await deliveries.prune(before, PRUNE_BATCH)) === PRUNE_BATCH);
        },
      }),
    ];
  },
  subscribers: (ctx) => {
    const { container, config } = ctx;
    const { endpoints, deliveries } = stores(ctx);
    return [
      fanOutSubscriber({ endpoints, deliveries, jobs: container.resolve(Tokens.Jobs), queue: deliveryQueue(config), clock: container.resolve(Tokens.Clock) }),
      disabledMailSubscriber({ identity: container.resolve(Tokens.Identity), mailer: container.resolve(Tokens.Mailer), logger: ctx.logger }),
    ];
  },
});
