import type { FastifyBaseLogger } from 'fastify';
import { z } from 'zod';
import { authorizedRecord } from '../../../core/identity/authorization.ts';
import { defineOperation, type AnyOperation } from '../../../core/operations/operations.ts';
import type { IdentityStores } from '../../../core/ports/identity.ts';
import type { Mailer, MailMessage } from '../../../core/ports/mail.ts';
import { MailDeliveryError } from '../../../core/services/mail-messages.ts';
import { mailActiveOwners } from '../../../core/services/owner-mail.ts';
import { serviceRecordKind } from '../apps-operations.ts';
import type { AppsStore } from '../apps-store.ts';
import type { DeployHooks } from '../deploy-pipeline.ts';
import type { ServiceSettings, UpkeepStore } from './upkeep-store.ts';

export interface DeployMailDeps {
  store: AppsStore;
  upkeep: UpkeepStore;
  mailer: Mailer;
  identity: IdentityStores;
  clock: () => Date;
  logger: Pick<FastifyBaseLogger, 'error'>;
}

const MAX_RECIPIENTS = 10;

/** The message a failed deployment sends. */
export function failureMessage(app: { name: string }, deployment: { id: string; commitSha: string | null }, reason: string, to: string): MailMessage {
  const commit = deployment.commitSha ? ` of commit ${deployment.commitSha.slice(0, 12)}` : '';
  return {
    to,
    subject: `Deploy of ${app.name} failed`,
    text: [
      `The deployment ${deployment.id}${commit} of the app ${app.name} failed:`,
      '',
      reason,
      '',
      `The version that was running keeps serving. The build log: GET /client/deployments/${deployment.id}/logs;`,
      'a fix proposed by a model: POST /client/services/{id}/autofix.',
    ].join('\n'),
  };
}

/**
 * Mail when a deployment fails, as the service's settings say (POST /services/{id}/email): to the
 * addresses given, or to the organisation's active owners when none are. An address the mail server
 * refuses for good is logged by the app's id and skipped; any other failure is logged (the deploy
 * has failed already: mail is never what fails it).
 */
export function failureMailHook(deps: DeployMailDeps): Required<Pick<DeployHooks, 'afterFailure'>> {
  return {
    async afterFailure(context, reason) {
      const settings = await deps.upkeep.settings(context.service.id);
      if (!settings.mailOnFailure) return;
      const messageTo = (address: string) => failureMessage(context.app, context.deployment, reason, address);
      try {
        if (settings.mailRecipients.length === 0) {
          await mailActiveOwners({ identity: deps.identity, mailer: deps.mailer, logger: deps.logger }, context.service.organizationId, messageTo, 'a failed deploy');
          return;
        }
        for (const address of settings.mailRecipients) {
          await deps.mailer.send(messageTo(address)).catch((error: unknown) => {
            if (error instanceof MailDeliveryError && !error.retryable) {
              deps.logger.error({ err: error.message, appId: context.app.id }, 'apps: a failed deploy could not be mailed to an address');
              return;
            }
            throw error;
          });
        }
      } catch (error) {
        deps.logger.error({ err: error instanceof Error ? error.message : String(error), appId: context.app.id }, 'apps: mailing a failed deploy failed');
      }
    },
  };
}

const mailSettingsView = z
  .object({
    object: z.literal('service_mail'),
    serviceId: z.string(),
    onFailure: z.boolean().describe('Whether a failed deployment is mailed'),
    recipients: z.array(z.string()).describe('Who is mailed; empty: the organisation’s active owners'),
    updatedAt: z.string().nullable(),
  })
  .meta({ id: 'ServiceMailSettings', description: 'Who is mailed when a deployment of the service fails' });

const view = (serviceId: string, settings: ServiceSettings) => ({
  object: 'service_mail' as const,
  serviceId,
  onFailure: settings.mailOnFailure,
  recipients: settings.mailRecipients,
  updatedAt: settings.updatedAt?.toISOString() ?? null,
});

export function mailOperations(deps: Pick<DeployMailDeps, 'store' | 'upkeep' | 'clock'>): AnyOperation[] {
  const serviceKind = serviceRecordKind(deps.store);
  const settings = defineOperation({
    name: 'services.email',
    method: 'POST',
    path: '/services/:id/email',
    summary: 'Mail someone when a deployment of the service fails',
    description:
      'Fields omitted keep what is stored, so `{}` reads the settings. A failed deployment (build, release command, health ' +
      'check) is mailed with its reason to `recipients`, or to the organisation’s active owners when the list is empty.',
    scope: 'apps:deploy',
    readOnly: false,
    idempotent: true,
    params: z.strictObject({ id: z.uuid() }),
    body: z.strictObject({
      onFailure: z.boolean().optional().describe('Mail a failed deployment (default false)'),
      recipients: z.array(z.email().max(254)).max(MAX_RECIPIENTS).optional().describe(`At most ${MAX_RECIPIENTS} addresses; empty: the organisation’s active owners`),
    }),
    bodyRequired: false,
    resource: { kind: serviceKind, access: 'write', in: 'path', field: 'id' },
    output: mailSettingsView,
    async handler({ body }, { authorization }) {
      const { service } = authorizedRecord(authorization, serviceKind).record;
      const recipients = body?.recipients ? [...new Set(body.recipients.map((address) => address.toLowerCase()))] : undefined;
      const updated =
        body?.onFailure === undefined && recipients === undefined
          ? await deps.upkeep.settings(service.id)
          : await deps.upkeep.updateSettings(service.id, service.organizationId, { mailOnFailure: body?.onFailure, mailRecipients: recipients }, deps.clock());
      return view(service.id, updated);
    },
  });
  return [settings];
}
