import type { DomainEvents } from '../../core/events/domain-events.ts';
import { defineSubscriber } from '../../core/events/domain-events.ts';
import { PermanentJobError, type QueueDefinition } from '../../core/jobs/queue-definitions.ts';
import type { IdentityStores } from '../../core/ports/identity.ts';
import type { Mailer } from '../../core/ports/mail.ts';
import { supportActs } from './support-desk.ts';
import type { SupportStore } from './support-store.ts';
import './support-events.ts';

/**
 * Support's acts made at the operator CLI, announced by the service: each becomes its public event,
 * emitted once (written through job.complete, fenced by the job's lease).
 */
export function supportActsQueue(deps: { store: SupportStore; events: DomainEvents }): QueueDefinition {
  return supportActs.handle(async (job) => {
    const { requestId, act, messageId, operator } = job.payload;
    const request = await deps.store.getForOperator(requestId);
    if (!request) throw new PermanentJobError(`support request ${requestId} no longer exists`);
    const base = { requestId, subject: request.subject, requesterId: request.requester.id };
    const actor = { kind: 'system' as const, id: 'support', label: `Support (${operator})`, credential: null };
    await job.complete((tx) =>
      act === 'answered'
        ? deps.events.emit(tx, {
            type: 'support.request_answered',
            organizationId: request.organizationId,
            subject: requestId,
            actor,
            data: { ...base, status: 'answered', messageId: messageId ?? '' },
          })
        : deps.events.emit(tx, {
            type: 'support.request_solved',
            organizationId: request.organizationId,
            subject: requestId,
            actor,
            data: { ...base, status: 'solved', solvedBy: 'support' },
          }),
    );
  });
}

/**
 * Mails the requester support's answer: the message itself and how to reply. At least once (a
 * retry after the mail server took it but the job's end was lost sends it again).
 */
export function requesterMail(deps: { store: SupportStore; identity: IdentityStores; mailer: Mailer; publicUrl: string | undefined }) {
  return defineSubscriber({
    name: 'support-requester-mail',
    events: ['support.request_answered'],
    maxAttempts: 10,
    async handle(event) {
      const { requestId, messageId, requesterId } = event.data;
      const [request, person] = await Promise.all([deps.store.getForOperator(requestId), deps.identity.people.get(requesterId)]);
      if (!request || !person) return;
      const answer = await deps.store.message(requestId, messageId);
      if (!answer) return;
      const where = `${deps.publicUrl?.replace(/\/+$/, '') ?? ''}/client/support/requests/${requestId}`;
      await deps.mailer.send({
        to: person.email,
        subject: `Re: ${request.subject}`,
        text: [
          `${answer.author.name} from support answered your request "${request.subject}":`,
          '',
          answer.body,
          '',
          `Reply with POST ${where}/messages, or mark it solved with POST ${where}/solve.`,
          ...(answer.attachments.length ? ['', `${answer.attachments.length} attachment(s): GET ${where}`] : []),
        ].join('\n'),
      });
    },
  });
}
