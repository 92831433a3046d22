import { z } from 'zod';
import { defineEventTypes, type PayloadsOf } from '../../core/events/event-catalogue.ts';
import { SCOPES } from '../../core/identity/scopes.ts';
import type { ApiKey } from '../../core/ports/identity.ts';

/** What every key event says about the key: never its secret, only the hint that tells it apart. */
const keyData = z.object({
  keyId: z.string(),
  projectId: z.string(),
  name: z.string(),
  hint: z.string().describe('Prefix and last four characters'),
  scopes: z.array(z.enum(SCOPES)),
  disabled: z.boolean(),
  expiresAt: z.string().nullable().describe('ISO 8601, UTC'),
});

const EXAMPLE_KEY = {
  keyId: '4f1c2a8e-7d3b-4e65-9a0c-1b2d3e4f5a6b',
  projectId: '0b5d7c7e-2f4e-4d0a-9a51-2f6f1c1f0a11',
  name: 'CI pipeline',
  hint: 'svc_live_…a1b2',
  scopes: ['inference' as const],
  disabled: false,
  expiresAt: null,
};

/** The fields of PATCH /client/keys/{id} an update may change, as key.updated lists them. */
const updatableFields = z.enum(['name', 'projectId', 'scopes', 'models', 'disabled', 'expiresAt', 'spendCap', 'rateLimits']);

export const KEY_EVENTS = defineEventTypes('keys', {
  'key.created': {
    schema: keyData,
    description: 'An API key was created',
    public: true,
    example: EXAMPLE_KEY,
  },
  'key.updated': {
    schema: keyData.extend({ changed: z.array(updatableFields).describe('The fields the update named') }),
    description: 'An API key was changed (renamed, re-scoped, moved, paused or resumed, limits changed); the data is the key after it',
    public: true,
    example: { ...EXAMPLE_KEY, name: 'CI pipeline (staging)', changed: ['name'] },
  },
  'key.disabled': {
    schema: keyData,
    description: 'An API key was paused: its calls are refused until it is resumed. Sent with the key.updated of the same change',
    public: true,
    example: { ...EXAMPLE_KEY, disabled: true },
  },
  'key.recreated': {
    schema: keyData.extend({
      previousHint: z.string().describe('The hint of the secret it replaced'),
      previousSecretExpiresAt: z.string().describe('ISO 8601, UTC: when the replaced secret stops working (the recreation time when there is no overlap)'),
    }),
    description: 'An API key was given a new secret; the key (id, settings, caps and usage) is the same and hint is the new secret’s',
    public: true,
    example: { ...EXAMPLE_KEY, hint: 'svc_live_…c3d4', previousHint: 'svc_live_…a1b2', previousSecretExpiresAt: '2026-05-01T12:05:00.000Z' },
  },
  'key.revoked': {
    schema: keyData.extend({ deleted: z.boolean().describe('True when the key was deleted for good (permanent=true)') }),
    description: 'An API key was revoked (it stays listed) or deleted; its calls are refused from now on',
    public: true,
    example: { ...EXAMPLE_KEY, deleted: false },
  },
});

declare module '../../core/events/domain-events.ts' {
  interface EventCatalogue extends PayloadsOf<typeof KEY_EVENTS> {}
}

export type KeyFieldName = z.output<typeof updatableFields>;

/** A key as its events carry it. */
export function keyEventData(key: ApiKey): z.output<typeof keyData> {
  return {
    keyId: key.id,
    projectId: key.projectId,
    name: key.name,
    hint: key.hint,
    scopes: key.scopes,
    disabled: key.disabled,
    expiresAt: key.expiresAt ? key.expiresAt.toISOString() : null,
  };
}
