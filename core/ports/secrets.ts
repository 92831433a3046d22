/**
 * Storage of customer-given secrets, already encrypted: this port never sees a plaintext.
 * core/services/secret-vault.ts encrypts, decrypts and rotates over it.
 */

/** The record a secret belongs to, e.g. `{ kind: 'webhook', id: 'wh_…' }`; it and the name are bound into the ciphertext. */
export interface SecretOwner {
  kind: string;
  id: string;
}

/** AES-256-GCM output and the id of the key that made it. */
export interface SealedSecret {
  keyId: string;
  nonce: Buffer;
  ciphertext: Buffer;
  authTag: Buffer;
}

export interface StoredSecret {
  owner: SecretOwner;
  name: string;
  /** 1 on creation, +1 on every put: what a compare-and-swap compares. Re-encryption keeps it. */
  version: number;
  sealed: SealedSecret;
  createdAt: Date;
  updatedAt: Date;
}

export interface SecretStore {
  get(owner: SecretOwner, name: string): Promise<StoredSecret | null>;
  /**
   * Creates or replaces. With `expectedVersion` it writes only if the stored version is that
   * (0: only if absent) and answers null otherwise. Returns the new version.
   */
  put(owner: SecretOwner, name: string, sealed: SealedSecret, expectedVersion?: number): Promise<number | null>;
  delete(owner: SecretOwner, name: string): Promise<boolean>;
  /** Every secret of the owners of `kind` with these ids, whatever their names; returns how many went. */
  deleteOwners(kind: string, ids: readonly string[]): Promise<number>;
  /** Names and versions, never the sealed values. */
  list(owner: SecretOwner): Promise<Array<{ name: string; version: number; updatedAt: Date }>>;
  /** For key rotation: a page of secrets not sealed under `keyId`, in a stable order after `after`. */
  listNotUnderKey(keyId: string, options: { after?: SecretCursor; limit: number }): Promise<StoredSecret[]>;
  /** Replaces the ciphertext of an unchanged secret (same version) without bumping its version. */
  reseal(owner: SecretOwner, name: string, version: number, sealed: SealedSecret): Promise<boolean>;
}

export interface SecretCursor {
  owner: SecretOwner;
  name: string;
}
