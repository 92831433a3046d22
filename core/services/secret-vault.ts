import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import { inspect } from 'node:util';
import type { Queryable } from '../ports/database.ts';
import type { SealedSecret, SecretCursor, SecretOwner, SecretStore, StoredSecret } from '../ports/secrets.ts';
import type { SecretKey, SecretKeyring } from './secret-keys.ts';

/**
 * Values customers give us to use on their behalf (upstream credentials, webhook signing secrets,
 * app environment values), encrypted at rest. Not to be confused with core/identity/api-tokens.ts, which makes
 * and hashes the tokens we issue (those are never stored in a readable form at all).
 *
 * Each value is sealed with AES-256-GCM under the keyring's current key, a fresh 96-bit nonce per
 * write, and additional authenticated data naming its owner and name: a ciphertext copied into
 * another owner's row, or altered in any byte, fails to open instead of yielding a value.
 */

/**
 * A plaintext that does not give itself away: JSON, string conversion and util.inspect (so pino,
 * console.log and error messages built with template strings) all print `[secret]`. Only
 * `reveal()` hands the value out, at the one place that must send it somewhere.
 */
export class SecretValue {
  readonly #value: string;

  constructor(value: string) {
    this.#value = value;
  }

  reveal(): string {
    return this.#value;
  }

  toJSON(): string {
    return '[secret]';
  }

  toString(): string {
    return '[secret]';
  }

  [inspect.custom](): string {
    return '[secret]';
  }
}

export type SecretVaultFailure = 'unconfigured' | 'unknown_key' | 'undecryptable' | 'invalid_name' | 'too_large';

/** Messages name the owner and the secret, never a value or a key. */
export class SecretVaultError extends Error {
  constructor(
    readonly reason: SecretVaultFailure,
    message: string,
  ) {
    super(message);
    this.name = 'SecretVaultError';
  }
}

export interface SecretRef {
  owner: SecretOwner;
  name: string;
  version: number;
}

export interface RotationReport {
  /** The key everything readable is now under. */
  keyId: string;
  resealed: number;
  /** Replaced by a put while the rotation ran (sealed under the current key by that put). */
  changed: number;
  /** Values no listed key opens, or that were tampered with; left as they are. */
  failed: Array<{ owner: SecretOwner; name: string; reason: SecretVaultFailure }>;
}

/** Customer values are small: credentials, tokens, environment values. */
export const MAX_SECRET_BYTES = 64 * 1024;
const OWNER_KIND = /^[a-z][a-z0-9_.-]{0,63}$/;
const IDENTIFIER = /^[A-Za-z0-9_.:@-]{1,200}$/;
const NONCE_BYTES = 12;
const TAG_BYTES = 16;

function checkNames(owner: SecretOwner, name?: string): void {
  if (!OWNER_KIND.test(owner.kind) || !IDENTIFIER.test(owner.id) || (name !== undefined && !IDENTIFIER.test(name))) {
    throw new SecretVaultError('invalid_name', 'a secret owner kind is lowercase letters, digits, _ . -; owner ids and names are letters, digits, _ . : @ - (1 to 200)');
  }
}

const label = (owner: SecretOwner, name: string): string => `${owner.kind}/${owner.id}/${name}`;

/** Binds a ciphertext to where it belongs. The parts cannot contain a newline (checkNames), so the join is unambiguous. */
function associatedData(owner: SecretOwner, name: string): Buffer {
  return Buffer.from(`svc-secret/v1\n${owner.kind}\n${owner.id}\n${name}`, 'utf8');
}

function seal(key: SecretKey, owner: SecretOwner, name: string, plaintext: string): SealedSecret {
  const nonce = randomBytes(NONCE_BYTES);
  const cipher = createCipheriv('aes-256-gcm', key.material, nonce, { authTagLength: TAG_BYTES });
  cipher.setAAD(associatedData(owner, name));
  const ciphertext = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
  return { keyId: key.id, nonce, ciphertext, authTag: cipher.getAuthTag() };
}

export class SecretVault {
  private readonly store: SecretStore;

  /** `keyring` null: listing and deleting work, anything that encrypts or decrypts says no key is configured. */
  constructor(
    private readonly storeFor: (db: Queryable) => SecretStore,
    db: Queryable,
    private readonly keyring: SecretKeyring | null,
  ) {
    this.store = storeFor(db);
  }

  /** The same vault writing through `tx`, so a secret is stored in the transaction of the row that owns it. */
  within(tx: Queryable): SecretVault {
    return new SecretVault(this.storeFor, tx, this.keyring);
  }

  /**
   * Encrypts and stores `value` as `name` of `owner`, replacing what was there. With
   * `expectedVersion` (0: must not exist yet) it writes only over that version and answers null
   * otherwise: a compare-and-swap, e.g. for rotating refresh tokens written by several replicas.
   */
  async put(owner: SecretOwner, name: string, value: string | SecretValue, options: { expectedVersion?: number } = {}): Promise<SecretRef | null> {
    checkNames(owner, name);
    const plaintext = typeof value === 'string' ? value : value.reveal();
    if (Buffer.byteLength(plaintext, 'utf8') > MAX_SECRET_BYTES) {
      throw new SecretVaultError('too_large', `secret ${label(owner, name)} is larger than ${MAX_SECRET_BYTES} bytes`);
    }
    const version = await this.store.put(owner, name, seal(this.currentKey(), owner, name, plaintext), options.expectedVersion);
    return version === null ? null : { owner, name, version };
  }

  /** The value wrapped in a SecretValue (call `reveal()` where it is used); null when there is none. */
  async get(owner: SecretOwner, name: string): Promise<{ ref: SecretRef; value: SecretValue } | null> {
    checkNames(owner, name);
    const stored = await this.store.get(owner, name);
    if (stored === null) return null;
    return { ref: { owner, name, version: stored.version }, value: new SecretValue(this.open(stored)) };
  }

  async delete(owner: SecretOwner, name: string): Promise<boolean> {
    checkNames(owner, name);
    return this.store.delete(owner, name);
  }

  /**
   * Forgets every secret of these owners at once, whatever their names: what a plugin calls when
   * the records owning them go (an erased organisation's webhook endpoints), through `within(tx)`
   * so the secrets go exactly when the records do. Needs no key: nothing is decrypted.
   */
  async deleteOwners(kind: string, ids: readonly string[]): Promise<number> {
    for (const id of ids) checkNames({ kind, id });
    return this.store.deleteOwners(kind, ids);
  }

  /** Names and versions only: listing never decrypts anything. */
  async list(owner: SecretOwner): Promise<Array<{ name: string; version: number; updatedAt: Date }>> {
    checkNames(owner);
    return this.store.list(owner);
  }

  /**
   * Re-encrypts every value not yet under the current key, page by page, each with a
   * compare-and-swap on its version so a concurrent put is never overwritten with an older value.
   * Run it after every replica has restarted with the new key first in its list.
   */
  async rotate(options: { pageSize?: number } = {}): Promise<RotationReport> {
    const current = this.currentKey();
    const report: RotationReport = { keyId: current.id, resealed: 0, changed: 0, failed: [] };
    let after: SecretCursor | undefined;
    for (;;) {
      const page = await this.store.listNotUnderKey(current.id, { after, limit: options.pageSize ?? 100 });
      if (page.length === 0) return report;
      for (const stored of page) {
        after = { owner: stored.owner, name: stored.name };
        let plaintext: string;
        try {
          plaintext = this.open(stored);
        } catch (error) {
          if (!(error instanceof SecretVaultError)) throw error;
          report.failed.push({ owner: stored.owner, name: stored.name, reason: error.reason });
          continue;
        }
        const resealed = await this.store.reseal(stored.owner, stored.name, stored.version, seal(current, stored.owner, stored.name, plaintext));
        if (resealed) report.resealed++;
        else report.changed++;
      }
    }
  }

  private requireKeyring(): SecretKeyring {
    if (this.keyring === null) {
      throw new SecretVaultError('unconfigured', 'no secret-encryption key is configured: set SVC_SECRET_KEYS (the same on every replica)');
    }
    return this.keyring;
  }

  private currentKey(): SecretKey {
    return this.requireKeyring().current;
  }

  /**
   * Seals a value kept outside the store, under the same keys and owner binding: for a file that
   * must be read without the database (the apps runtime's state). `rotate` never sees it: whoever
   * keeps it seals it again (under the current key) before an older key is dropped.
   */
  sealDetached(owner: SecretOwner, name: string, value: string | SecretValue): SealedSecret {
    checkNames(owner, name);
    return seal(this.currentKey(), owner, name, typeof value === 'string' ? value : value.reveal());
  }

  /** Opens what `sealDetached` made, with whichever listed key sealed it. */
  openDetached(owner: SecretOwner, name: string, sealed: SealedSecret): SecretValue {
    checkNames(owner, name);
    return new SecretValue(this.openSealed(owner, name, sealed));
  }

  private open(stored: StoredSecret): string {
    return this.openSealed(stored.owner, stored.name, stored.sealed);
  }

  private openSealed(owner: SecretOwner, name: string, sealed: SealedSecret): string {
    const where = label(owner, name);
    const key = this.requireKeyring().get(sealed.keyId);
    if (key === undefined) {
      const message = `secret ${where} is sealed under key ${sealed.keyId}, which is not among the configured keys`;
      throw new SecretVaultError('unknown_key', message);
    }
    try {
      const decipher = createDecipheriv('aes-256-gcm', key.material, sealed.nonce, { authTagLength: TAG_BYTES });
      decipher.setAAD(associatedData(owner, name));
      decipher.setAuthTag(sealed.authTag);
      return Buffer.concat([decipher.update(sealed.ciphertext), decipher.final()]).toString('utf8');
    } catch {
      throw new SecretVaultError('undecryptable', `secret ${where} fails its integrity check: it was altered or belongs to another owner`);
    }
  }
}
