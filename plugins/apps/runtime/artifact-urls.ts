import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import type { SecretVault } from '../../../core/services/secret-vault.ts';

/**
 * Signed, expiring URLs of a deployment's artifact, for the kubernetes runtime's init container:
 * `<base>/apps-artifacts/<deployment id>.tar.gz?expires=<unix seconds>&signature=<hex>`, the
 * signature an HMAC-SHA256 of `<deployment id>.<expires>` under a key kept in the secret vault (one
 * for the whole service, made at first use, so every replica signs and checks alike). The route that
 * serves them is artifact-route.ts.
 */
export const ARTIFACT_ROUTE_PREFIX = '/apps-artifacts/';

const KEY_OWNER = { kind: 'apps.runtime', id: 'artifact-urls' } as const;
const KEY_NAME = 'hmac-key';

export class ArtifactUrls {
  constructor(
    private readonly key: Buffer,
    private readonly options: { base: string; ttlMs: number; now: () => Date },
  ) {}

  /** The vault's key, made (32 random bytes) when there is none; two replicas racing keep the first written. */
  static async fromVault(vault: SecretVault, options: { base: string; ttlMs: number; now: () => Date }): Promise<ArtifactUrls> {
    let stored = await vault.get(KEY_OWNER, KEY_NAME);
    if (!stored) {
      await vault.put(KEY_OWNER, KEY_NAME, randomBytes(32).toString('hex'), { expectedVersion: 0 });
      stored = await vault.get(KEY_OWNER, KEY_NAME);
    }
    if (!stored) throw new Error('apps: the artifact URL key could not be stored in the secret vault');
    return new ArtifactUrls(Buffer.from(stored.value.reveal(), 'hex'), options);
  }

  sign(deploymentId: string): string {
    const expires = Math.floor((this.options.now().getTime() + this.options.ttlMs) / 1000);
    const base = this.options.base.replace(/\/+$/, '');
    const query = new URLSearchParams({ expires: String(expires), signature: this.signature(deploymentId, expires) });
    return `${base}${ARTIFACT_ROUTE_PREFIX}${encodeURIComponent(deploymentId)}.tar.gz?${query}`;
  }

  /** Whether the signature is this key's for that deployment and expiry, and the expiry is still ahead. */
  verify(deploymentId: string, expires: string | undefined, signature: string | undefined): boolean {
    if (!expires || !/^\d{1,12}$/.test(expires) || !signature || !/^[0-9a-f]{64}$/.test(signature)) return false;
    if (Number(expires) * 1000 <= this.options.now().getTime()) return false;
    const wanted = Buffer.from(this.signature(deploymentId, Number(expires)), 'hex');
    return timingSafeEqual(wanted, Buffer.from(signature, 'hex'));
  }

  private signature(deploymentId: string, expires: number): string {
    return createHmac('sha256', this.key).update(`${deploymentId}.${expires}`).digest('hex');
  }
}
