/**
 * Fast shared state for admission control: rate limits, concurrency leases, small caches and
 * pub/sub. One in-memory implementation (a single process) and one Redis implementation (many
 * replicas); both pass the same contract suite (test/contracts/coordination.test.ts).
 *
 * Every multi-entry call is all-or-nothing: either each entry is admitted, or none is changed.
 */

export interface RateEntry {
  /** Counter identity, e.g. `rpm:key:<id>`. The adapter adds its own namespace prefix. */
  key: string;
  /** Units allowed per period; the burst is the whole limit (a full bucket). */
  limit: number;
  periodMs: number;
  /** Units this call takes (1 for a request, an estimate for tokens). May exceed what is left only if `limit` allows it at all. */
  cost: number;
}

export interface RateDecision {
  key: string;
  limit: number;
  /** Units still available right now after this call (never negative). */
  remaining: number;
  /** Milliseconds until the bucket is full again. */
  resetMs: number;
  /** When refused: milliseconds until `cost` units would fit; 0 when allowed. */
  retryAfterMs: number;
}

export interface RateResult {
  allowed: boolean;
  decisions: RateDecision[];
}

/** Generic cell rate algorithm (a leaky bucket kept as one "theoretical arrival time" per key). */
export interface RateLimiter {
  /** Admit all entries or none. */
  consume(entries: RateEntry[]): Promise<RateResult>;
  /** Read the state without taking anything. */
  peek(entries: Omit<RateEntry, 'cost'>[]): Promise<RateDecision[]>;
  /**
   * Correct an earlier consume once the real cost is known: a positive cost takes more (the bucket
   * may go into debt, which later calls then wait out), a negative cost gives units back.
   */
  adjust(entries: RateEntry[]): Promise<void>;
}

export interface LeaseEntry {
  key: string;
  /** Maximum simultaneous leases under this key. */
  limit: number;
}

export interface LeaseResult {
  acquired: boolean;
  /** When refused: the first key that was full. */
  fullKey?: string;
}

/**
 * Expiring leases for concurrency caps. A lease that is never released (crashed process, lost
 * client) frees itself after its TTL, unlike a counter that must be decremented.
 */
export interface LeaseStore {
  acquire(entries: LeaseEntry[], leaseId: string, ttlMs: number): Promise<LeaseResult>;
  /** Extend a live lease (long streams heartbeat); false if it had already expired. */
  renew(keys: string[], leaseId: string, ttlMs: number): Promise<boolean>;
  release(keys: string[], leaseId: string): Promise<void>;
  /** Unexpired leases under a key. */
  active(key: string): Promise<number>;
}

export interface KeyValueCache {
  get(key: string): Promise<string | null>;
  set(key: string, value: string, ttlMs: number): Promise<void>;
  delete(key: string): Promise<void>;
  /** Atomic add; a missing key starts at 0 and gets `ttlMs` (an existing key keeps its expiry). */
  increment(key: string, by: number, ttlMs: number): Promise<number>;
}

export type Unsubscribe = () => Promise<void>;

export interface PubSub {
  publish(channel: string, message: string): Promise<void>;
  subscribe(channel: string, handler: (message: string) => void): Promise<Unsubscribe>;
}

export interface AllowanceTake {
  key: string;
  /** Integer units (micro-USD for money). */
  amount: number;
  /**
   * Added to the counter's value to give what is left (default 0). The credit counter holds the
   * balance itself; a spend cap's counter holds minus its period's spend and its take carries the
   * cap here, so the counter does not depend on the cap's size: a cap raised or lowered while calls
   * are in flight applies at once to everything they reserved.
   */
  headroom?: number;
  /**
   * false: refuse unless the whole amount is there. true: take what is left if anything is (the
   * last call may overdraw by the difference), refuse only at zero.
   */
  shrink: boolean;
}

export type AllowanceResult =
  | { ok: true; taken: number[] }
  /** Counters that do not exist yet: seed them from the durable store and try again. */
  | { ok: false; reason: 'missing'; keys: string[] }
  | { ok: false; reason: 'insufficient'; key: string; remaining: number };

/**
 * Remaining allowances (credit balance, spend caps) as integer counters, for reserve-then-settle.
 * Counters are seeded from the durable store when missing; every take and give refreshes their
 * TTL, so a counter is re-read from the durable store only after it has been idle that long.
 */
export interface AllowanceStore {
  /** Creates the counter unless it exists (first seeder wins). */
  seed(key: string, value: number, ttlMs: number): Promise<void>;
  /** All or nothing across the entries. */
  take(entries: AllowanceTake[], ttlMs: number): Promise<AllowanceResult>;
  /** Adds (negative: subtracts, without any floor); a missing counter is left missing. */
  give(entries: Array<{ key: string; amount: number }>, ttlMs: number): Promise<void>;
  peek(keys: string[]): Promise<Array<number | null>>;
  delete(keys: string[]): Promise<void>;
}

/**
 * Everything one gateway call takes before it runs: request and token windows, concurrency leases
 * and money allowances. Counters are named as in the ports above (and share their state).
 */
export interface GateRequest {
  /** Requests-per-window buckets (cost 1 each, as a rule). */
  requests: RateEntry[];
  leases: LeaseEntry[];
  leaseId: string;
  leaseTtlMs: number;
  /** Token buckets, charged the call's upper-bound estimate. */
  tokens: RateEntry[];
  takes: AllowanceTake[];
  counterTtlMs: number;
}

/**
 * The first check that refused, in this order: requests, concurrency, tokens, money. Decisions
 * describe the buckets after the call when it was admitted and as they are otherwise.
 */
export type GateResult = { requests: RateDecision[]; tokens: RateDecision[] } & (
  | { ok: true; taken: number[] }
  | { ok: false; refused: 'requests' | 'tokens' }
  | { ok: false; refused: 'concurrency'; fullKey: string }
  | { ok: false; refused: 'money'; allowance: Exclude<AllowanceResult, { ok: true }> }
);

/** What a finished call gives back or owes: its lease, the reservation beyond its real cost, its token estimate. */
export interface GateSettlement {
  leaseKeys: string[];
  leaseId: string;
  /** Added to each counter (negative: the call cost more than was reserved). */
  gives: Array<{ key: string; amount: number }>;
  counterTtlMs: number;
  /** Token buckets corrected by the difference between the estimate and the real count (adjust semantics). */
  tokens: RateEntry[];
}

/**
 * Admission in one atomic step per phase: admit checks every entry and takes all of them or none
 * (one script on Redis, one synchronous pass in memory), settle returns what the call did not use.
 */
export interface AdmissionGate {
  admit(request: GateRequest): Promise<GateResult>;
  settle(settlement: GateSettlement): Promise<void>;
  readonly recovery: GateRecovery;
}

/**
 * Money the durable store does not know yet, per scope (`key:<id>`, `project:<id>`,
 * `account:<id>`): what calls in flight reserved plus what finished calls cost before their
 * request-log rows were written. A counter that goes missing is seeded from the durable store plus
 * these amounts, so it never forgets a reservation.
 *
 * A store that can lose its data while replicas run (Redis restarted without persistence, failed
 * over to an empty replica, or evicting) fences admissions when it notices, asks every replica for
 * its outstanding amounts, and admits again only after a recovery window in which every connected
 * replica has had the chance to answer; a seed then adds what the other replicas reported. A
 * single-process store never loses data behind its owner's back, so there are no other replicas.
 */
export interface GateRecovery {
  /** Declared once by the metering kernel: this replica's outstanding micro-USD per scope. */
  setOutstandingSource(source: () => ReadonlyMap<string, number>): void;
  /** What other replicas reported for this scope since the store last lost its data (0 when none). */
  othersOutstanding(scope: string): Promise<number>;
}

export interface Coordination {
  readonly kind: 'memory' | 'redis';
  readonly gate: AdmissionGate;
  readonly rateLimiter: RateLimiter;
  readonly allowances: AllowanceStore;
  readonly leases: LeaseStore;
  readonly cache: KeyValueCache;
  readonly pubsub: PubSub;
  /** Resolves when the store answers a trivial command (Redis PING; in memory at once): readiness. */
  ping(): Promise<void>;
  close(): Promise<void>;
}
