import type { Queryable } from '../../core/ports/database.ts';
import type { SecretVault } from '../../core/services/secret-vault.ts';

const OWNER_KIND = 'apps.service';
const NAME = 'env';

/**
 * A service's variables, sealed in the secret vault as one JSON object (values are secrets: API keys,
 * database URLs). Editing them after the deploy is not built yet (README: not yet); the deploy
 * routes set them.
 */
export class AppEnv {
  constructor(private readonly vault: SecretVault) {}

  async write(tx: Queryable, serviceId: string, env: Readonly<Record<string, string>>): Promise<void> {
    if (Object.keys(env).length === 0) return;
    await this.vault.within(tx).put({ kind: OWNER_KIND, id: serviceId }, NAME, JSON.stringify(env));
  }

  async read(serviceId: string): Promise<Record<string, string>> {
    const stored = await this.vault.get({ kind: OWNER_KIND, id: serviceId }, NAME);
    return stored ? (JSON.parse(stored.value.reveal()) as Record<string, string>) : {};
  }

  async names(serviceId: string): Promise<string[]> {
    return Object.keys(await this.read(serviceId));
  }

  async forget(tx: Queryable, serviceIds: readonly string[]): Promise<void> {
    if (serviceIds.length > 0) await this.vault.within(tx).deleteOwners(OWNER_KIND, serviceIds);
  }
}
