import { z } from 'zod';
import { defineQueue } from '../../core/jobs/queue-definitions.ts';
import type { WebhooksConfig } from './webhook-config.ts';
import { attemptsAllowed } from './retry-schedule.ts';

/**
 * Runs a delivery lost with its worker (a crash, a lost lease) again; each such run takes one of the
 * schedule's places, so a few spare runs keep a delivery from ending without its last attempt.
 */
const SPARE_RUNS = 3;

/**
 * One job per delivery, one run per attempt: the handler chooses when the next run comes
 * (RetryJobAt, from the retry schedule and the receiver's retry-after), never a timer of its own.
 */
export function deliveryQueue(config: WebhooksConfig) {
  return defineQueue({
    name: 'webhooks.deliver',
    payload: z.object({ deliveryId: z.uuid() }),
    concurrency: config.concurrency,
    maxAttempts: attemptsAllowed(config) + SPARE_RUNS,
    // Renewed every third while an attempt runs; what a crash costs before another replica repeats it.
    leaseMs: Math.max(30_000, config.timeoutMs * 2),
  });
}

export type DeliveryQueue = ReturnType<typeof deliveryQueue>;
