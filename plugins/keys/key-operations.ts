import { personIdOf } from '../../core/identity/credential.ts';
import { z } from 'zod';
import type { Authenticator } from '../../core/identity/authenticator.ts';
import { ApiError } from '../../core/kernel/errors.ts';
import { toSpendCap } from '../../core/identity/spend-cap.ts';
import { defineOperation, type AnyOperation } from '../../core/operations/operations.ts';
import type { IdentityStores, IdentityStoresFactory, KeyRateLimits, SpendReader } from '../../core/ports/identity.ts';
import { authorizedKey, authorizedProject } from '../../core/identity/authorization.ts';
import { visibleProjectIds } from '../../core/identity/project-access.ts';
import { resourceId } from '../../core/vocabulary/ids.ts';
import { listResponse, pageQuery } from '../../core/vocabulary/pagination.ts';
import { generateToken, hashToken, KEY_PREFIX, tokenHint } from '../../core/identity/api-tokens.ts';
import {
  createdKeyView,
  createKeyRequest,
  keyDetailView,
  keyListView,
  keyRemovalView,
  type rateLimitsInput,
  recreatedKeyView,
  recreateKeyRequest,
  updatedKeyView,
  updateKeyRequest,
} from './key-schemas.ts';
import { assertMayRecreate, assertMayResume, assertModelsWithin, assertNoEscalation, assertNotOwnRestrictions, assertOwnerFor, inheritedRestrictions } from './key-rules.ts';
import { toBudgetView, toKeyView, toSpendView } from './key-view.ts';
import { keyEventData, type KeyFieldName } from './key-events.ts';
import type { DomainEvents } from '../../core/events/domain-events.ts';
import type { KeyCreationCheck } from '../../core/identity/key-creation-checks.ts';
import { actorOf } from '../../core/operations/operation-events.ts';
// Catalogues the codes this module answers with (core/kernel/error-catalogue.ts).
import './key-errors.ts';

interface Deps {
  identity: IdentityStores;
  /** The request log's spend windows (metering's; nothing spent without it). */
  spend: SpendReader;
  /** The same stores over the operation's transaction, for writes recorded with the change. */
  identityFor: IdentityStoresFactory;
  authenticator: Authenticator;
  /** Emits the key events in the transaction of the change. */
  events: DomainEvents;
  clock: () => Date;
  /** Other plugins' say on a new key's project (core/identity/key-creation-checks.ts), asked in the creating transaction. */
  creationChecks: readonly KeyCreationCheck[];
}

const idParams = z.strictObject({ id: resourceId.describe('API key id') });

export const KEYS_PAGE_DEFAULT = 50;
export const KEYS_PAGE_MAX = 200;

const toRateLimits = (input: z.output<typeof rateLimitsInput> | undefined): KeyRateLimits => ({
  requestsPerMinute: input?.requestsPerMinute ?? null,
  tokensPerMinute: input?.tokensPerMinute ?? null,
  concurrency: input?.concurrency ?? null,
});

export function keyOperations(deps: Deps): AnyOperation[] {
  const { identity, identityFor, authenticator, clock, spend, events, creationChecks } = deps;

  const list = defineOperation({
    name: 'keys.list',
    method: 'GET',
    path: '/keys',
    summary: 'List API keys, newest first (never their plaintext)',
    scope: 'keys:read',
    readOnly: true,
    query: pageQuery({ defaultLimit: KEYS_PAGE_DEFAULT, maxLimit: KEYS_PAGE_MAX, id: resourceId }).extend({
      projectId: resourceId.optional().describe('Only keys of this project'),
    }),
    resource: { kind: 'project', access: 'read', in: 'query', field: 'projectId', keyOwnProjectOnly: true },
    output: keyListView,
    async handler({ query }, { credential }) {
      const now = clock();
      // An API key lists its own project's keys only, whatever other scopes it holds.
      const projectId = query.projectId ?? (credential.kind === 'key' ? credential.projectId : undefined);
      const page = await identity.apiKeys.page(credential.organizationId, { projectId, projectIds: await visibleProjectIds(identity, credential) }, query);
      return listResponse(page, (key) => toKeyView(key, now));
    },
  });

  const create = defineOperation({
    name: 'keys.create',
    method: 'POST',
    path: '/keys',
    summary: 'Create an API key; the plaintext is returned once',
    readOnly: false,
    scope: 'keys:write',
    body: createKeyRequest,
    resource: {
      kind: 'project',
      access: 'write',
      in: 'body',
      field: 'projectId',
      whenAbsent: 'default-project',
      keyOwnProjectOnly: { code: 'cross_project', message: 'An API key can only create keys in its own project' },
    },
    errors: ['scope_escalation', 'limit_escalation', 'owner_required', ...creationChecks.flatMap((check) => check.errors)],
    output: createdKeyView,
    status: 201,
    async handler({ body }, { credential, transaction, authorization }) {
      const projectId = authorizedProject(authorization).id;
      if (body.expiresAt !== undefined && body.expiresAt !== null) assertOwnerFor(credential, 'expiresAt');
      if (body.spendCap !== undefined && body.spendCap !== null) assertOwnerFor(credential, 'spendCap');
      if (body.rateLimits !== undefined) assertOwnerFor(credential, 'rateLimits');
      const scopes = body.scopes ?? ['inference'];
      assertNoEscalation(credential, scopes);
      // A key's key starts from the key's own restrictions (key-rules.ts); only an owner sets these fields.
      const inherited = credential.kind === 'key' ? inheritedRestrictions(credential) : null;
      const models = body.models !== undefined ? body.models : (inherited?.modelAllowList ?? null);
      assertModelsWithin(credential, models);
      const expiresAt = body.expiresAt ?? inherited?.expiresAt ?? null;
      if (expiresAt && expiresAt <= clock()) {
        throw new ApiError('invalid_parameter', 'expiresAt must be in the future', { param: 'expiresAt' });
      }
      const token = generateToken(KEY_PREFIX);
      const key = await transaction(async (tx) => {
        for (const check of creationChecks) await check.check(tx, { organizationId: credential.organizationId, projectId });
        const created = await identityFor(tx).apiKeys.create({
          organizationId: credential.organizationId,
          projectId,
          name: body.name,
          tokenHash: hashToken(token),
          hint: tokenHint(token),
          scopes,
          modelAllowList: models,
          expiresAt,
          spendCap: toSpendCap(body.spendCap ?? null) ?? inherited?.spendCap ?? null,
          rateLimits: inherited?.rateLimits ?? toRateLimits(body.rateLimits),
          createdByPersonId: personIdOf(credential),
          createdByKeyId: credential.kind === 'key' ? credential.keyId : null,
        });
        const data = keyEventData(created);
        await events.emit(tx, { type: 'key.created', organizationId: credential.organizationId, subject: created.id, actor: actorOf(credential), data });
        return created;
      });
      return { ...toKeyView(key, clock()), key: token };
    },
  });

  const get = defineOperation({
    name: 'keys.get',
    method: 'GET',
    path: '/keys/:id',
    summary: 'One API key with spend windows and budget status',
    scope: 'keys:read',
    readOnly: true,
    params: idParams,
    resource: { kind: 'key', access: 'read', in: 'path', field: 'id' },
    output: keyDetailView,
    async handler(_input, { authorization }) {
      const key = authorizedKey(authorization);
      const now = clock();
      const windows = await spend.forKey(key.id, now);
      return { ...toKeyView(key, now), spend: toSpendView(windows), budget: toBudgetView(key, windows) };
    },
  });

  const update = defineOperation({
    name: 'keys.update',
    method: 'PATCH',
    path: '/keys/:id',
    summary: 'Rename, re-scope, pause/resume, or change the model list, expiry or spend cap of a key',
    readOnly: false,
    idempotent: true,
    scope: 'keys:write',
    params: idParams,
    body: updateKeyRequest,
    resource: [
      { kind: 'key', access: 'write', in: 'path', field: 'id' },
      {
        // The destination of a move; an API key sees only its own project's keys, so for a key
        // "another project" is a move, which is a person's act.
        kind: 'project',
        access: 'write',
        in: 'body',
        field: 'projectId',
        keyOwnProjectOnly: { code: 'key_cannot_move_key', message: "An API key cannot move a key to another project; that is a person's act" },
      },
    ],
    errors: ['key_not_found', 'app_owned_key', 'key_revoked_conflict', 'scope_escalation', 'limit_escalation', 'key_cannot_change_itself', 'paused_by_person', 'owner_required'],
    output: updatedKeyView,
    async handler({ params, body }, { credential, transaction, authorization }) {
      const key = authorizedKey(authorization);
      if (body.projectId !== undefined && body.projectId !== key.projectId && key.appId) {
        throw new ApiError('app_owned_key', undefined, { param: 'projectId' });
      }
      assertNotOwnRestrictions(credential, key, body);
      if (body.scopes) assertNoEscalation(credential, body.scopes);
      if (body.models !== undefined) assertModelsWithin(credential, body.models);
      if (body.expiresAt !== undefined) assertOwnerFor(credential, 'expiresAt');
      if (body.spendCap !== undefined) assertOwnerFor(credential, 'spendCap');
      if (body.rateLimits !== undefined) assertOwnerFor(credential, 'rateLimits');
      if (body.disabled !== undefined && key.revokedAt) {
        throw new ApiError('key_revoked_conflict', undefined, { param: 'disabled' });
      }
      if (body.disabled === false) assertMayResume(credential, key);
      const updated = await transaction(async (tx) => {
        const changed = await identityFor(tx).apiKeys.update(credential.organizationId, key.id, {
          name: body.name,
          projectId: body.projectId,
          scopes: body.scopes,
          modelAllowList: body.models,
          disabled: body.disabled,
          disabledBy: credential.kind === 'key' ? { kind: 'key', id: credential.keyId } : { kind: 'person', id: credential.personId },
          expiresAt: body.expiresAt,
          spendCap: body.spendCap === undefined ? undefined : toSpendCap(body.spendCap),
          rateLimits: body.rateLimits === undefined ? undefined : toRateLimits(body.rateLimits),
        });
        // Refused inside the transaction, so the call is recorded as the 404 it answers.
        if (!changed) throw new ApiError('key_not_found', `No API key ${params.id}`, { param: 'id' });
        const emitted = { organizationId: credential.organizationId, subject: key.id, actor: actorOf(credential) };
        const fields = Object.keys(body) as KeyFieldName[];
        await events.emit(tx, { ...emitted, type: 'key.updated', data: { ...keyEventData(changed), changed: fields } });
        if (changed.disabled && !key.disabled) await events.emit(tx, { ...emitted, type: 'key.disabled', data: keyEventData(changed) });
        return changed;
      });
      await authenticator.invalidate({ kind: 'key', id: key.id });
      return { object: 'ack' as const, ok: true as const, key: toKeyView(updated, clock()) };
    },
  });

  const remove = defineOperation({
    name: 'keys.delete',
    method: 'DELETE',
    path: '/keys/:id',
    summary: 'Revoke a key (it stays listed), or delete it with permanent=true (its usage history stays)',
    readOnly: false,
    destructive: true,
    idempotent: true,
    scope: 'keys:write',
    params: idParams,
    query: z.object({ permanent: z.enum(['true']).optional().describe('Only value: true') }),
    resource: { kind: 'key', access: 'write', in: 'path', field: 'id' },
    output: keyRemovalView,
    async handler({ query }, { credential, transaction, authorization }) {
      const key = authorizedKey(authorization);
      const deleted = query.permanent === 'true';
      await transaction(async (tx) => {
        if (deleted) await identityFor(tx).apiKeys.delete(credential.organizationId, key.id);
        else await identityFor(tx).apiKeys.revoke(credential.organizationId, key.id);
        // Revoking a revoked key again changes nothing, so it tells no one; deleting one does.
        if (deleted || key.revokedAt === null) {
          const data = { ...keyEventData(key), deleted };
          await events.emit(tx, { type: 'key.revoked', organizationId: credential.organizationId, subject: key.id, actor: actorOf(credential), data });
        }
      });
      await authenticator.invalidate({ kind: 'key', id: key.id });
      return { object: 'ack' as const, ok: true as const, id: key.id, status: query.permanent === 'true' ? ('deleted' as const) : ('revoked' as const) };
    },
  });

  const recreate = defineOperation({
    name: 'keys.recreate',
    method: 'POST',
    path: '/keys/:id/recreate',
    summary: 'Give a key a new secret, keeping its id, settings, caps and usage; the plaintext is returned once',
    description: [
      'The key stays the same record (id, name, project, scopes, models, expiry, spend cap, rate limits, who made it,',
      'the keys it made, its usage and what its cap has counted); only its secret changes, so nothing that names the key',
      'by id has to change. The replaced secret stops working at once (overlapSeconds 0, the default) or when the',
      'overlap ends, on every replica; recreating again during an overlap shortens the older secret to the new',
      'overlap. Who may: as for PATCH (keys:write, the key in reach); a key may recreate itself and the keys it made,',
      'and another key only if it could grant that key’s scopes and models and has no expiry, cap or rate limits.',
      'A revoked key or an app’s key answers 409. Sends key.recreated.',
    ].join(' '),
    readOnly: false,
    destructive: true,
    wide: true,
    scope: 'keys:write',
    params: idParams,
    body: recreateKeyRequest,
    bodyRequired: false,
    resource: { kind: 'key', access: 'write', in: 'path', field: 'id' },
    errors: ['key_not_found', 'key_revoked_conflict', 'app_owned_key', 'scope_escalation', 'limit_escalation'],
    output: recreatedKeyView,
    async handler({ body }, { credential, transaction, authorization }) {
      const key = authorizedKey(authorization);
      if (key.revokedAt) throw new ApiError('key_revoked_conflict', 'This key is revoked; a revoked key cannot be recreated', { param: 'id' });
      if (key.appId) {
        throw new ApiError('app_owned_key', "This key belongs to an app and is replaced with its app's gateway key (POST /client/services/{id}/gateway-key/replace)", { param: 'id' });
      }
      const makers = credential.kind === 'key' && key.createdByKeyId ? ((await identity.credentials.findKeyById(key.id))?.ancestors ?? []) : [];
      assertMayRecreate(
        credential,
        key,
        makers.map((maker) => maker.id),
      );
      const now = clock();
      const previousSecretExpiresAt = new Date(now.getTime() + (body.overlapSeconds ?? 0) * 1000);
      const token = generateToken(KEY_PREFIX);
      const recreated = await transaction(async (tx) => {
        const secret = { tokenHash: hashToken(token), hint: tokenHint(token), retiredUntil: previousSecretExpiresAt, now };
        const changed = await identityFor(tx).apiKeys.replaceSecret(credential.organizationId, key.id, secret);
        if (!changed) throw new ApiError('key_not_found', `No API key ${key.id}`, { param: 'id' });
        const data = { ...keyEventData(changed), previousHint: key.hint, previousSecretExpiresAt: previousSecretExpiresAt.toISOString() };
        await events.emit(tx, { type: 'key.recreated', organizationId: credential.organizationId, subject: key.id, actor: actorOf(credential), data });
        return changed;
      });
      // Every replica drops the key's cached secrets: the replaced one is looked up again, found
      // with the end of its overlap (or not at all), and refused from then on.
      await authenticator.invalidate({ kind: 'key', id: key.id });
      return { ...toKeyView(recreated, now), key: token, previousSecretExpiresAt: previousSecretExpiresAt.toISOString() };
    },
  });

  return [list, create, get, update, remove, recreate];
}
