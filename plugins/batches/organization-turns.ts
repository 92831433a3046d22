import type { Coordination } from '../../core/ports/coordination.ts';

/** How long a line waits here for its organisation's turn before giving its slot back (a snooze). */
const DEFAULT_WAIT_MS = 5_000;
/** How often a waiting line asks again, for turns freed on other replicas (this one's wake it at once). */
const ASK_EVERY_MS = 250;

/**
 * An organisation's share of the batch workers: at most `limit` of its lines run at once over every
 * replica (a coordination lease per organisation). A line that finds its organisation full waits here
 * for a turn, woken as soon as one of this process's lines gives one back and asking again every
 * 250 ms for turns freed elsewhere; after 5 s it gives up, and the caller snoozes the job so the slot
 * goes to another organisation's lines. Waiting rather than snoozing at once matters: a snoozed line
 * is claimed again from the database, and with more slots than turns every free slot would claim and
 * snooze lines as fast as the database answers, starving the lines that run.
 */
export class OrganizationTurns {
  private readonly waiters = new Map<string, Set<() => void>>();

  constructor(
    private readonly coordination: Coordination,
    private readonly limit: number,
    private readonly leaseTtlMs: number,
    private readonly waitMs = DEFAULT_WAIT_MS,
  ) {}

  /** Takes a turn for `holder` (a job id); false when none came within the wait, or the signal aborted. */
  async take(organizationId: string, holder: string, signal: AbortSignal): Promise<boolean> {
    const key = turnKey(organizationId);
    const deadline = performance.now() + this.waitMs;
    for (;;) {
      const lease = await this.coordination.leases.acquire([{ key, limit: this.limit }], holder, this.leaseTtlMs);
      if (lease.acquired) return true;
      const left = deadline - performance.now();
      if (left <= 0 || signal.aborted) return false;
      await this.wake(organizationId, Math.min(ASK_EVERY_MS, left), signal);
    }
  }

  /** Gives the turn back and wakes one line of the organisation waiting here. */
  async give(organizationId: string, holder: string): Promise<void> {
    await this.coordination.leases.release([turnKey(organizationId)], holder).catch(() => undefined);
    const waiting = this.waiters.get(organizationId);
    const first = waiting?.values().next().value;
    first?.();
  }

  private wake(organizationId: string, ms: number, signal: AbortSignal): Promise<void> {
    return new Promise((resolve) => {
      let waiting = this.waiters.get(organizationId);
      if (!waiting) this.waiters.set(organizationId, (waiting = new Set()));
      const done = () => {
        clearTimeout(timer);
        signal.removeEventListener('abort', done);
        waiting.delete(done);
        if (waiting.size === 0) this.waiters.delete(organizationId);
        resolve();
      };
      const timer = setTimeout(done, ms);
      signal.addEventListener('abort', done, { once: true });
      waiting.add(done);
    });
  }
}

const turnKey = (organizationId: string) => `batches:running:${organizationId}`;
