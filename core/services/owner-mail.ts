import type { FastifyBaseLogger } from 'fastify';
import type { IdentityStores } from '../ports/identity.ts';
import type { Mailer, MailMessage } from '../ports/mail.ts';
import { MailDeliveryError } from './mail-messages.ts';

export interface OwnerMailDeps {
  identity: IdentityStores;
  mailer: Mailer;
  logger: Pick<FastifyBaseLogger, 'error'>;
}

/**
 * Mails every active owner of an organisation the message `messageTo` makes for their address: how
 * the service tells an organisation something only its owners may act on (a spend alert, an
 * endpoint switched off). Run it from an event's subscriber, which runs until it succeeds once: a
 * retry after the mail server failed part-way may repeat the message to owners already mailed (at
 * least once). An address the server refuses for good is logged (the person's id, never the
 * address) and skipped, so one bad address does not hold back the others; any other failure throws
 * for the retry.
 */
export async function mailActiveOwners(deps: OwnerMailDeps, organizationId: string, messageTo: (address: string) => MailMessage, what: string): Promise<void> {
  const memberships = await deps.identity.memberships.listForOrganization(organizationId);
  const owners = memberships.filter((membership) => membership.role === 'owner' && membership.status === 'active');
  for (const owner of owners) {
    const person = await deps.identity.people.get(owner.personId);
    if (!person) continue;
    try {
      await deps.mailer.send(messageTo(person.email));
    } catch (error) {
      if (error instanceof MailDeliveryError && !error.retryable) {
        deps.logger.error({ err: error, personId: person.id }, `${what} could not be mailed to an owner`);
        continue;
      }
      throw error;
    }
  }
}
