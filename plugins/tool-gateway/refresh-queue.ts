import { z } from 'zod';
import { defineQueue } from '../../core/jobs/queue-definitions.ts';
import type { ToolGatewayConfig } from './tool-gateway-config.ts';

/**
 * One job per upstream due a refresh (queued by the periodic sweep, at most one waiting per upstream
 * and sweep): discovery is I/O to a customer's server, kept off the sweep so one slow server holds
 * back no other.
 */
export function refreshQueue(config: ToolGatewayConfig) {
  return defineQueue({
    name: 'tool-gateway.refresh',
    payload: z.object({ upstreamId: z.uuid() }),
    concurrency: config.refreshConcurrency,
    // A failed discovery is recorded in health, not retried: the next sweep asks again.
    maxAttempts: 1,
    leaseMs: 300_000,
  });
}
