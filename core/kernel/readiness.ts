import type { Coordination } from '../ports/coordination.ts';
import type { Queryable } from '../ports/database.ts';

/** A dependency readiness checks, as named in a 503's message. */
export type ReadinessCheck = 'database' | 'coordination' | 'jobs';

export interface ReadinessReport {
  readonly ready: boolean;
  /** The dependencies that did not answer, in check order; empty when ready. */
  readonly failed: readonly ReadinessCheck[];
}

export interface ReadinessDeps {
  database: Queryable;
  coordination: Pick<Coordination, 'ping'>;
  /** This process's job runner when it runs workers (role worker or all); null when it runs none. */
  jobs: { readonly claiming: boolean } | null;
  /** Monotonic milliseconds (tests pin it). */
  now?: () => number;
  /** How long a dependency may take to answer before it counts as down. */
  timeoutMs?: number;
  /** How long a probe's answer is reused. */
  cacheMs?: number;
}

export const READINESS_TIMEOUT_MS = 1_000;
export const READINESS_CACHE_MS = 1_000;

/**
 * Whether this process should be sent traffic (GET /health/ready). The policy:
 * - the database answers `SELECT 1` and the coordination store answers a ping (Redis PING; the
 *   in-memory store always does), each within `timeoutMs`;
 * - a process that runs workers has its job runner claiming (read live: it costs nothing);
 * - the dependencies' answer is reused for `cacheMs` and callers arriving while a probe runs share
 *   it, so a load balancer polling hard costs the database one trivial query a second.
 * Draining is not asked here: once SIGTERM begins, core/http/draining.ts answers every request,
 * this one included, 503 before routing.
 */
export class Readiness {
  private readonly now: () => number;
  private readonly timeoutMs: number;
  private readonly cacheMs: number;
  private probed: { at: number; failed: readonly ReadinessCheck[] } | null = null;
  private probing: Promise<readonly ReadinessCheck[]> | null = null;

  constructor(private readonly deps: ReadinessDeps) {
    this.now = deps.now ?? (() => performance.now());
    this.timeoutMs = deps.timeoutMs ?? READINESS_TIMEOUT_MS;
    this.cacheMs = deps.cacheMs ?? READINESS_CACHE_MS;
  }

  async check(): Promise<ReadinessReport> {
    const failed = [...(await this.dependencies())];
    if (this.deps.jobs !== null && !this.deps.jobs.claiming) failed.push('jobs');
    return { ready: failed.length === 0, failed };
  }

  private dependencies(): Promise<readonly ReadinessCheck[]> {
    const cached = this.probed;
    if (cached !== null && this.now() - cached.at < this.cacheMs) return Promise.resolve(cached.failed);
    this.probing ??= this.probe().finally(() => {
      this.probing = null;
    });
    return this.probing;
  }

  private async probe(): Promise<readonly ReadinessCheck[]> {
    const [database, coordination] = await Promise.all([this.answers(() => this.deps.database.query('SELECT 1')), this.answers(() => this.deps.coordination.ping())]);
    const failed: ReadinessCheck[] = [];
    if (!database) failed.push('database');
    if (!coordination) failed.push('coordination');
    this.probed = { at: this.now(), failed };
    return failed;
  }

  /** True when fn resolves within the timeout; its error (which may name a host) goes nowhere. */
  private answers(fn: () => Promise<unknown>): Promise<boolean> {
    return new Promise<boolean>((resolve) => {
      const timer = setTimeout(() => resolve(false), this.timeoutMs);
      let pending: Promise<unknown>;
      try {
        pending = fn();
      } catch {
        pending = Promise.reject(new Error('probe threw'));
      }
      pending.then(
        () => {
          clearTimeout(timer);
          resolve(true);
        },
        () => {
          clearTimeout(timer);
          resolve(false);
        },
      );
    });
  }
}
