import { z } from 'zod';
import { defineEventTypes, type PayloadsOf } from '../../core/events/event-catalogue.ts';

/** What every support event says about the request: never a message's text, which stays in the request. */
const requestData = z.object({
  requestId: z.string(),
  subject: z.string(),
  status: z.enum(['open', 'answered', 'solved']),
  requesterId: z.string().describe('The person who opened the request'),
});

const EXAMPLE = {
  requestId: '6a1f0c2e-3b4d-4e5f-8a9b-0c1d2e3f4a5b',
  subject: 'Invoice for March shows the wrong company name',
  status: 'open' as const,
  requesterId: '9e8d7c6b-5a49-4382-9170-6f5e4d3c2b1a',
};

export const SUPPORT_EVENTS = defineEventTypes('support', {
  'support.request_opened': {
    schema: requestData.extend({ attachments: z.number().int().describe('Files attached to the first message') }),
    description: 'A person opened a support request',
    public: true,
    example: { ...EXAMPLE, attachments: 1 },
  },
  'support.request_answered': {
    schema: requestData.extend({ messageId: z.string().describe("The operator's message") }),
    description: 'Support answered a request; the requester is mailed. The request waits on the customer (status answered)',
    public: true,
    example: { ...EXAMPLE, status: 'answered' as const, messageId: '0f9e8d7c-6b5a-4938-8271-605f4e3d2c1b' },
  },
  'support.request_solved': {
    schema: requestData.extend({ solvedBy: z.enum(['customer', 'support']).describe('Who marked it solved') }),
    description: 'A request was marked solved, by a person of the organisation or by support. A new message reopens it',
    public: true,
    example: { ...EXAMPLE, status: 'solved' as const, solvedBy: 'customer' as const },
  },
});

declare module '../../core/events/domain-events.ts' {
  interface EventCatalogue extends PayloadsOf<typeof SUPPORT_EVENTS> {}
}
