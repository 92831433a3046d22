import type { OrganizationEraser } from '../../core/kernel/organization-erasure.ts';
import type { SecretVault } from '../../core/services/secret-vault.ts';
import type { DeliveryStore } from './delivery-store.ts';
import type { EndpointStore } from './endpoint-store.ts';
import { forgetSecretsOf } from './signing-secrets.ts';

/**
 * What an account deletion removes of webhooks (core/kernel/organization-erasure.ts): the
 * deliveries with every attempt (their bodies and the receivers' answers describe the account),
 * then the endpoints with their signing secrets in the vault, deleted through the same
 * transaction, so no sealed secret outlives its endpoint. A delivery job still queued finds its
 * delivery gone and does nothing (delivery-worker.ts).
 */
export function webhookErasers({ endpoints, deliveries, vault }: { endpoints: EndpointStore; deliveries: DeliveryStore; vault: SecretVault }): OrganizationEraser[] {
  return [
    { name: 'webhook deliveries', erase: (tx, organizationId) => deliveries.eraseOrganization(tx, organizationId) },
    {
      name: 'webhook endpoints',
      async erase(tx, organizationId) {
        const endpointIds = await endpoints.eraseOrganization(tx, organizationId);
        await forgetSecretsOf(vault.within(tx), endpointIds);
        return endpointIds.length;
      },
    },
  ];
}
