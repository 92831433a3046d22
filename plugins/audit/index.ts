import { defineSubscriber } from '../../core/events/domain-events.ts';
import { definePlugin } from '../../core/kernel/plugin.ts';
import { OrganizationErasersPoint } from '../../core/kernel/organization-erasure.ts';
import { Tokens } from '../../core/kernel/di-tokens.ts';
import { auditMigrations } from './audit-migrations.ts';
import { auditOperations } from './audit-operations.ts';
import { AuditStore } from './audit-store.ts';

/**
 * The audit log: a subscriber of the kernel's `management.operation` events (one per management
 * write), read by owners through `GET /client/audit-log`.
 */
export const auditPlugin = definePlugin({
  name: 'audit',
  description: 'Audit log of management writes: who, what, when, with which credential, and the outcome',
  migrations: auditMigrations,
  register: ({ container, extensions }) => {
    const store = new AuditStore(container.resolve(Tokens.Database));
    extensions.contribute(OrganizationErasersPoint, { name: 'audit log', erase: (tx, organizationId) => store.eraseOrganization(tx, organizationId) });
  },
  operations: ({ container }) => auditOperations({ store: new AuditStore(container.resolve(Tokens.Database)) }),
  subscribers: ({ container }) => {
    const store = new AuditStore(container.resolve(Tokens.Database));
    return [
      defineSubscriber({
        name: 'audit-log',
        events: ['management.operation'],
        concurrency: 4,
        maxAttempts: 10,
        async handle(event, job) {
          const { actor, organizationId, data } = event;
          // Management calls always have a person or a key behind them; anything else is not ours to list.
          if (organizationId === null || actor === null || actor.kind === 'system') return;
          await job.complete((tx) =>
            store.record(tx, {
              eventId: event.id,
              organizationId,
              occurredAt: event.occurredAt,
              operation: data.operation,
              method: data.method,
              path: data.path,
              params: data.params,
              targetId: data.targetId,
              actor: { kind: actor.kind, id: actor.id, label: actor.label },
              credential: actor.credential,
              status: data.status,
              errorCode: data.code,
              requestId: data.requestId,
            }),
          );
        },
      }),
    ];
  },
});
