import { performance } from 'node:perf_hooks';
import type { Coordination } from '../../core/ports/coordination.ts';
import { MemoryAdmissionGate } from './memory-admission-gate.ts';
import { MemoryAllowances } from './memory-allowances.ts';
import { MemoryCache } from './memory-cache.ts';
import { MemoryLeaseStore } from './memory-leases.ts';
import { MemoryPubSub } from './memory-pubsub.ts';
import { MemoryRateLimiter } from './memory-rate-limiter.ts';

/** Entries are purged lazily when touched; this sweep catches the ones nobody touches again. */
const SWEEP_INTERVAL_MS = 30_000;

export interface MemoryCoordinationOptions {
  /**
   * Milliseconds on any monotonic scale; tests inject a fake clock. The default is
   * performance.now(): monotonic (a wall-clock jump cannot refill or drain buckets) and small, so
   * doubles keep sub-microsecond precision in the GCRA arithmetic.
   */
  now?: () => number;
}

/** Coordination for a single process. State lives in this instance and dies with it. */
export function createMemoryCoordination(options: MemoryCoordinationOptions = {}): Coordination {
  const now = options.now ?? (() => performance.now());
  const rateLimiter = new MemoryRateLimiter(now);
  const leases = new MemoryLeaseStore(now);
  const cache = new MemoryCache(now);
  const allowances = new MemoryAllowances(now);
  const pubsub = new MemoryPubSub();

  const sweeper = setInterval(() => {
    const at = now();
    rateLimiter.sweep(at);
    leases.sweep(at);
    cache.sweep(at);
    allowances.sweep(at);
  }, SWEEP_INTERVAL_MS);
  // The sweep is housekeeping only; it must never be what keeps the process alive.
  sweeper.unref();

  return {
    kind: 'memory',
    gate: new MemoryAdmissionGate(rateLimiter, leases, allowances, now),
    rateLimiter,
    allowances,
    leases,
    cache,
    pubsub,
    async ping() {},
    async close() {
      clearInterval(sweeper);
      rateLimiter.clear();
      leases.clear();
      cache.clear();
      allowances.clear();
      pubsub.clear();
    },
  };
}
