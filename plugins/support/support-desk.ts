import { z } from 'zod';
import type { QueueSpec } from '../../core/jobs/queue-definitions.ts';
import { defineQueue } from '../../core/jobs/queue-definitions.ts';
import type { Database, Queryable } from '../../core/ports/database.ts';
import type { SupportMessage, SupportRequest, SupportStatus, SupportStore } from './support-store.ts';

/**
 * What support's acts leave for the service to announce: the request was answered (with which
 * message) or solved. The operator CLI writes the act and this job in one transaction; a replica's
 * worker then emits the public event (support.request_answered / _solved) exactly once, and the
 * requester's mail follows from the event. The CLI knows none of the event's subscribers (webhooks),
 * so it leaves the emitting to the service, which does.
 */
export const supportActs = defineQueue({
  name: 'support.acts',
  payload: z.strictObject({ requestId: z.uuid(), act: z.enum(['answered', 'solved']), messageId: z.uuid().optional(), operator: z.string() }),
  maxAttempts: 20,
  backoff: { baseMs: 5_000, maxMs: 600_000 },
});

export interface SupportDeskDeps {
  db: Database;
  store: SupportStore;
  /** Puts a job on the service's queue inside the act's transaction (composition/operator-storage.ts). */
  enqueue<S extends z.ZodType>(tx: Queryable, queue: QueueSpec<S>, payload: z.input<S>): Promise<void>;
  clock: () => Date;
}

/** The operator's side of support (`npm run cli -- support …`): every organisation's requests. */
export class SupportDesk {
  constructor(private readonly deps: SupportDeskDeps) {}

  /** Oldest waiting first; `status` defaults to open (waiting on support). */
  list(options: { status?: SupportStatus | 'all'; limit?: number } = {}): Promise<SupportRequest[]> {
    const status = options.status === 'all' ? undefined : (options.status ?? 'open');
    return this.deps.store.queue({ status, limit: options.limit ?? 50 });
  }

  async show(requestId: string): Promise<{ request: SupportRequest; messages: SupportMessage[] } | null> {
    const request = await this.deps.store.getForOperator(requestId);
    return request ? { request, messages: await this.deps.store.messages(request.id) } : null;
  }

  /** Support's answer: the request waits on the customer (answered), and the requester will be mailed. Null: no such request. */
  async reply(input: { requestId: string; body: string; operator: string }): Promise<{ messageId: string } | null> {
    const body = input.body.trim();
    if (body === '') throw new Error('the reply is empty');
    const { db, store, enqueue, clock } = this.deps;
    return db.transaction(async (tx) => {
      const request = await store.getForOperator(input.requestId, tx);
      if (!request) return null;
      const messageId = await store.addMessage(tx, {
        organizationId: request.organizationId,
        requestId: request.id,
        message: { author: { kind: 'support', id: null, name: input.operator }, body, attachments: [] },
        status: 'answered',
        now: clock(),
      });
      await enqueue(tx, supportActs, { requestId: request.id, act: 'answered', messageId, operator: input.operator });
      return { messageId };
    });
  }

  /** Marks a request solved on support's side. Null: no such request; false: it was solved already. */
  async solve(input: { requestId: string; operator: string }): Promise<boolean | null> {
    const { db, store, enqueue, clock } = this.deps;
    return db.transaction(async (tx) => {
      const request = await store.getForOperator(input.requestId, tx);
      if (!request) return null;
      if (request.status === 'solved') return false;
      await store.markSolved(tx, request.id, clock());
      await enqueue(tx, supportActs, { requestId: request.id, act: 'solved', operator: input.operator });
      return true;
    });
  }
}
