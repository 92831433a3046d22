import type { Authenticator } from '../../core/identity/authenticator.ts';
import { generateToken, hashToken, KEY_PREFIX, tokenHint } from '../../core/identity/api-tokens.ts';
import type { Scope } from '../../core/identity/scopes.ts';
import type { DomainEvents } from '../../core/events/domain-events.ts';
import type { EventActor } from '../../core/ports/events.ts';
import type { Queryable, Transaction } from '../../core/ports/database.ts';
import type { ApiKey, IdentityStoresFactory } from '../../core/ports/identity.ts';
import { keyEventData } from './key-events.ts';

/**
 * What an app's own gateway key may do: call the models (`/v1`, files included) and the tool gateway
 * (`/mcp/gateway`, which asks no scope of its own). No management scope: an app cannot read or change
 * keys, apps or usage through its key; only operations declared `ownAppKey` (its own storage) let it
 * act on its own app.
 */
export const APP_KEY_SCOPES: readonly Scope[] = ['inference'];

/**
 * An app's own API key (`SVC_API_KEY`), kept by the keys plugin's store and announced with its events
 * like any key, made and revoked by the apps plugin in its own transactions. The key carries its
 * app's id: PATCH /keys/{id} refuses to move it (409 `app_owned_key`); it moves with its app (`move`).
 */
export class AppKeys {
  constructor(
    private readonly deps: {
      identityFor: IdentityStoresFactory;
      events: DomainEvents;
      authenticator: Authenticator;
    },
  ) {}

  /** A new key of the app's project; the plaintext is answered here only (the caller seals it). */
  async create(tx: Transaction, input: { organizationId: string; projectId: string; appId: string; name: string; actor: EventActor | null }): Promise<{ key: ApiKey; token: string }> {
    const token = generateToken(KEY_PREFIX);
    const key = await this.deps.identityFor(tx).apiKeys.create({
      organizationId: input.organizationId,
      projectId: input.projectId,
      appId: input.appId,
      name: input.name,
      tokenHash: hashToken(token),
      hint: tokenHint(token),
      scopes: [...APP_KEY_SCOPES],
      modelAllowList: null,
      expiresAt: null,
      spendCap: null,
      createdByPersonId: null,
      createdByKeyId: null,
    });
    const data = keyEventData(key);
    await this.deps.events.emit(tx, { type: 'key.created', organizationId: input.organizationId, subject: key.id, actor: input.actor, data });
    return { key, token };
  }

  /** The app's keys that are not revoked (one, but for the moment of a replacement). */
  async ofApp(tx: Queryable, organizationId: string, appId: string): Promise<ApiKey[]> {
    const keys = await this.deps.identityFor(tx).apiKeys.list(organizationId);
    return keys.filter((key) => key.appId === appId && key.revokedAt === null);
  }

  /** Revokes a key of the app; call `forget` once the transaction committed. */
  async revoke(tx: Transaction, organizationId: string, keyId: string, actor: EventActor | null): Promise<void> {
    const key = await this.deps.identityFor(tx).apiKeys.revoke(organizationId, keyId);
    if (!key) return;
    await this.deps.events.emit(tx, { type: 'key.revoked', organizationId, subject: key.id, actor, data: { ...keyEventData(key), deleted: false } });
  }

  /** Moves the app's keys with the app to another project. */
  async move(tx: Transaction, organizationId: string, appId: string, projectId: string, actor: EventActor | null): Promise<ApiKey[]> {
    const moved: ApiKey[] = [];
    for (const key of await this.ofApp(tx, organizationId, appId)) {
      const changed = await this.deps.identityFor(tx).apiKeys.update(organizationId, key.id, { projectId });
      if (!changed) continue;
      await this.deps.events.emit(tx, {
        type: 'key.updated',
        organizationId,
        subject: key.id,
        actor,
        data: { ...keyEventData(changed), changed: ['projectId'] },
      });
      moved.push(changed);
    }
    return moved;
  }

  /** Every replica drops its cached credentials of these keys (after the change committed). */
  async forget(keyIds: readonly string[]): Promise<void> {
    for (const id of keyIds) await this.deps.authenticator.invalidate({ kind: 'key', id });
  }
}
