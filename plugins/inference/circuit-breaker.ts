import type { Coordination, Unsubscribe } from '../../core/ports/coordination.ts';

const CHANNEL = 'inference:circuit-open';

export interface CircuitSettings {
  failureThreshold: number;
  windowMs: number;
  cooldownMs: number;
}

/**
 * Per-route cooldown after repeated failures, shared by every replica. Failures are counted in the
 * shared cache (only on the failure path); opening a circuit is broadcast, so the hot path asks
 * only local memory whether a route is cooling down.
 */
export class CircuitBreaker {
  private readonly openUntil = new Map<string, number>();
  private unsubscribe: Unsubscribe | null = null;

  constructor(
    private readonly coordination: Coordination,
    private readonly settings: CircuitSettings,
    private readonly now: () => number = Date.now,
  ) {}

  async start(): Promise<void> {
    this.unsubscribe = await this.coordination.pubsub.subscribe(CHANNEL, (message) => {
      try {
        const { route, until } = JSON.parse(message) as { route: string; until: number };
        if (typeof route === 'string' && typeof until === 'number') this.openUntil.set(route, until);
      } catch {
        // Not ours to interpret: ignore.
      }
    });
  }

  async stop(): Promise<void> {
    await this.unsubscribe?.();
  }

  isOpen(route: string): boolean {
    const until = this.openUntil.get(route);
    if (until === undefined) return false;
    if (until > this.now()) return true;
    this.openUntil.delete(route);
    return false;
  }

  /** Counts a failure; opens the circuit for everyone once the threshold is reached in the window. */
  async recordFailure(route: string): Promise<void> {
    try {
      const failures = await this.coordination.cache.increment(`circuit:${route}`, 1, this.settings.windowMs);
      if (failures >= this.settings.failureThreshold && !this.isOpen(route)) {
        const until = this.now() + this.settings.cooldownMs;
        this.openUntil.set(route, until);
        await this.coordination.cache.delete(`circuit:${route}`);
        await this.coordination.pubsub.publish(CHANNEL, JSON.stringify({ route, until }));
      }
    } catch {
      // Losing a failure count only delays a cooldown; it must never fail the request.
    }
  }
}
