import type { InputGuard, InputGuardCheck } from '../../core/gateway/input-guards.ts';
import type { Credential } from '../../core/identity/credential.ts';
import type { PubSub, Unsubscribe } from '../../core/ports/coordination.ts';
import type { GuardrailStore } from './guardrail-store.ts';
import { CompiledRules } from './rule-evaluation.ts';

const INVALIDATION_CHANNEL = 'guardrails:invalidate';
/** Accounts held at once; past it the oldest entry goes (a busy account is soon read again). */
const MAX_CACHED_ACCOUNTS = 10_000;

interface Cached {
  readonly check: CompiledRules | null;
  readonly until: number;
}

/**
 * The guard this plugin contributes to InputGuardsPoint: per account, its enabled rules compiled,
 * or null when it has none (then the call path does no per-text work). Every /v1 call asks, so the
 * answer is cached per organisation and given without a promise while fresh. A rule written on
 * any replica is pushed to every replica over pub/sub, as the authenticator does for credentials;
 * the TTL bounds staleness should a message be lost.
 */
export class AccountGuard implements InputGuard {
  private readonly cache = new Map<string, Cached>();
  /** Reads under way: concurrent misses share one query; an invalidation drops its entry here too. */
  private readonly loading = new Map<string, { promise: Promise<CompiledRules | null> }>();
  private unsubscribe: Unsubscribe | null = null;

  constructor(
    private readonly store: GuardrailStore,
    private readonly pubsub: PubSub,
    private readonly ttlMs: number,
    private readonly now: () => number = Date.now,
  ) {}

  async start(): Promise<void> {
    this.unsubscribe = await this.pubsub.subscribe(INVALIDATION_CHANNEL, (organizationId) => this.forget(organizationId));
  }

  async stop(): Promise<void> {
    const unsubscribe = this.unsubscribe;
    this.unsubscribe = null;
    // An unreachable Redis refusing the UNSUBSCRIBE must not stop the rest of the shutdown.
    await unsubscribe?.().catch(() => undefined);
  }

  forCall(credential: Credential): InputGuardCheck | null | Promise<InputGuardCheck | null> {
    const hit = this.cache.get(credential.organizationId);
    if (hit && hit.until > this.now()) return hit.check;
    return this.load(credential.organizationId);
  }

  /** After a rule of this account changed: every replica (this one at once) reads the rules again. */
  async invalidate(organizationId: string): Promise<void> {
    this.forget(organizationId);
    await this.pubsub.publish(INVALIDATION_CHANNEL, organizationId);
  }

  private forget(organizationId: string): void {
    this.cache.delete(organizationId);
    // A read that began before the change may return the old rules: it must not be cached.
    this.loading.delete(organizationId);
  }

  private load(organizationId: string): Promise<CompiledRules | null> {
    const pending = this.loading.get(organizationId);
    if (pending) return pending.promise;
    const read: { promise: Promise<CompiledRules | null> } = { promise: Promise.resolve(null) };
    read.promise = (async () => {
      try {
        const rules = await this.store.enabled(organizationId);
        const check = rules.length > 0 ? new CompiledRules(rules) : null;
        if (this.loading.get(organizationId) === read) this.remember(organizationId, check);
        return check;
      } finally {
        if (this.loading.get(organizationId) === read) this.loading.delete(organizationId);
      }
    })();
    this.loading.set(organizationId, read);
    return read.promise;
  }

  private remember(organizationId: string, check: CompiledRules | null): void {
    if (this.cache.size >= MAX_CACHED_ACCOUNTS && !this.cache.has(organizationId)) {
      const oldest = this.cache.keys().next().value;
      if (oldest !== undefined) this.cache.delete(oldest);
    }
    this.cache.set(organizationId, { check, until: this.now() + this.ttlMs });
  }
}
