import { z } from 'zod';
import { defineEventTypes, type PayloadsOf } from '../../core/events/event-catalogue.ts';

const EXAMPLE_OPERATION = '5d1f0c3a-8e2b-4f7a-9c61-0a2b3c4d5e6f';

/** The account's deletion: scheduled by an owner, cancelled by one, or carried out after the grace period. */
export const ACCOUNT_EVENTS = defineEventTypes('account', {
  'account.deletion_scheduled': {
    schema: z.object({
      operationId: z.string().describe('The operation to poll: GET /client/operations/{id}'),
      runsAt: z.string().describe('When the data is removed unless the deletion is cancelled first (ISO 8601, UTC)'),
      revokedKeys: z.number().int().describe('API keys revoked at once by the request'),
    }),
    description: "An owner asked for the account's deletion: every key was revoked at once, and the data is removed at runsAt unless an owner cancels first",
    public: true,
    example: { operationId: EXAMPLE_OPERATION, runsAt: '2026-12-15T09:30:00.000Z', revokedKeys: 3 },
  },
  'account.deletion_cancelled': {
    schema: z.object({ operationId: z.string() }),
    description: "An owner cancelled the account's scheduled deletion; the keys it revoked stay revoked",
    public: true,
    example: { operationId: EXAMPLE_OPERATION },
  },
  'account.deleted': {
    schema: z.object({
      operationId: z.string(),
      erased: z.record(z.string(), z.number().int()).describe('Rows removed, by what they were'),
    }),
    // Internal: by the time it is emitted the account's webhook endpoints are gone with its data.
    description: "The account's data was removed after the grace period; the credit ledger and payments are kept as accounting records",
    public: false,
    example: { operationId: EXAMPLE_OPERATION, erased: { keys: 3, projects: 1, memberships: 2, people: 1, 'request logs': 120 } },
  },
});

declare module '../../core/events/domain-events.ts' {
  interface EventCatalogue extends PayloadsOf<typeof ACCOUNT_EVENTS> {}
}
