import { z } from 'zod';
import { spendCapInput, spendCapView } from '../../core/identity/spend-cap.ts';
import { SCOPES } from '../../core/identity/scopes.ts';
import { listOf } from '../../core/vocabulary/pagination.ts';
import { instantView, timestampSchema } from '../../core/vocabulary/timestamps.ts';

export const scopeList = z
  .array(z.enum(SCOPES))
  .max(SCOPES.length * 2)
  .transform((scopes) => [...new Set(scopes)]);

export const modelList = z.array(z.string().min(1).max(200)).max(500).nullable();

const keyName = z.string().trim().min(1).max(100);

const positiveLimit = z.number().int().positive().max(1_000_000_000).nullable().optional();
export const rateLimitsInput = z.strictObject({
  requestsPerMinute: positiveLimit,
  tokensPerMinute: positiveLimit,
  concurrency: z.number().int().positive().max(100_000).nullable().optional(),
});
const rateLimitsView = z
  .object({
    requestsPerMinute: z.number().nullable(),
    tokensPerMinute: z.number().nullable(),
    concurrency: z.number().nullable(),
  })
  .meta({ id: 'RateLimits', description: "A key's own rate limits; null means the operator's default applies" });

export const createKeyRequest = z.strictObject({
  name: keyName,
  projectId: z.uuid().optional().describe("Defaults to the caller's project (a key) or the default project (a person)"),
  scopes: scopeList.optional().describe('Defaults to ["inference"]'),
  models: modelList.optional().describe("Model allow-list; null means every model. Absent: every model, or the creating API key's own list (a key grants only models it may use)"),
  expiresAt: timestampSchema.nullable().optional().describe("Owner only; a key made by an API key gets that key's expiry"),
  spendCap: spendCapInput.nullable().optional().describe("Owner only; a key made by an API key gets that key's cap"),
  rateLimits: rateLimitsInput.optional().describe("Owner only; null or absent fields use the operator's defaults (a key made by an API key gets that key's limits)"),
});

export const updateKeyRequest = z
  .strictObject({
    name: keyName.optional(),
    projectId: z.uuid().optional().describe("Moving a key is a person's act; app keys move with their app"),
    scopes: scopeList.optional(),
    models: modelList.optional(),
    disabled: z.boolean().optional(),
    expiresAt: timestampSchema.nullable().optional().describe('Owner only; null clears'),
    spendCap: spendCapInput.nullable().optional().describe('Owner only; null clears'),
    rateLimits: rateLimitsInput.optional().describe('Owner only; replaces all three; null fields use the defaults'),
  })
  .refine((body) => Object.keys(body).length > 0, 'send at least one field to change');

/** The longest overlap a recreate may give the secret it replaces: a day. */
export const MAX_OVERLAP_SECONDS = 86_400;

export const recreateKeyRequest = z.strictObject({
  overlapSeconds: z.number().int().min(0).max(MAX_OVERLAP_SECONDS).optional().describe('How long the replaced secret keeps working, 0 to 86400 seconds; default 0: it stops at once'),
});

/** The wire views below are named schemas of the OpenAPI document (`.meta({ id })`). */
export const keyView = z
  .object({
    object: z.literal('api_key'),
    id: z.uuid(),
    name: z.string(),
    hint: z.string().describe('Prefix and last four characters; the whole key is shown only once'),
    projectId: z.uuid(),
    appId: z.uuid().nullable(),
    scopes: z.array(z.enum(SCOPES)),
    models: z.array(z.string()).nullable(),
    status: z.enum(['active', 'disabled', 'expired', 'revoked']),
    disabled: z.boolean(),
    expiresAt: instantView.nullable(),
    spendCap: spendCapView.nullable(),
    rateLimits: rateLimitsView.describe('This key’s own limits; null means the default applies'),
    createdAt: instantView,
    updatedAt: instantView,
    lastUsedAt: instantView.nullable(),
    revokedAt: instantView.nullable(),
  })
  .meta({ id: 'Key', description: 'An API key, without its plaintext' });

export const keyListView = listOf(keyView);

export const createdKeyView = keyView
  .extend({
    // A pattern, not zod's startsWith: that would document a non-standard `format`.
    key: z
      .string()
      .regex(/^svc_live_/)
      .describe('The plaintext key. Shown once: store it now.'),
  })
  .meta({ id: 'CreatedKey', description: 'A new API key with its plaintext, which is shown this once' });

export const recreatedKeyView = createdKeyView
  .extend({
    previousSecretExpiresAt: instantView.describe('When the replaced secret stops working: now, or the end of the overlap asked for'),
  })
  .meta({ id: 'RecreatedKey', description: 'The same key (id, settings, caps and usage) with a new secret, shown this once' });

export const spendWindowsView = z
  .object({
    totalUsd: z.number(),
    todayUsd: z.number(),
    weekUsd: z.number(),
    monthUsd: z.number(),
  })
  .meta({ id: 'SpendWindows', description: 'Spend in USD over all time and in the current UTC day, ISO week and calendar month' });

export const budgetStatusView = z
  .object({
    state: z.enum(['uncapped', 'ok', 'alerting', 'exceeded']),
    capUsd: z.number().nullable(),
    period: z.enum(['day', 'week', 'month', 'total']).nullable(),
    mode: z.enum(['blocking', 'alert']).nullable(),
    spentUsd: z.number().nullable().describe('Spend in the current period of the cap'),
    remainingUsd: z.number().nullable(),
  })
  .meta({ id: 'BudgetStatus', description: 'Where a key stands against its own spend cap' });

export const keyDetailView = keyView
  .extend({ spend: spendWindowsView, budget: budgetStatusView })
  .meta({ id: 'KeyDetail', description: 'An API key with its spend and where it stands against its cap' });

export const updatedKeyView = z.object({ object: z.literal('ack'), ok: z.literal(true), key: keyView }).meta({ id: 'UpdatedKey', description: 'The key as it is after the change' });

export const keyRemovalView = z
  .object({ object: z.literal('ack'), ok: z.literal(true), id: z.uuid(), status: z.enum(['revoked', 'deleted']) })
  .meta({ id: 'KeyRemoval', description: 'A key revoked (it stays listed) or deleted' });
