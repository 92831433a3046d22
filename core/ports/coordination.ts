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
 * `unseeded`: the store lost its data less than a minute ago and these rate buckets (requests or
 * tokens) have not been re-seeded yet: seed them (GateRecovery.seedWindow) and ask again.
 */
export type GateResult = { requests: RateDecision[]; tokens: RateDecision[] } & (
  | { ok: true; taken: number[] }
  | { ok: false; refused: 'unseeded'; keys: string[] }
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

/** What one replica holds in a scope that the durable store (the request log) does not know yet. */
export interface Outstanding {
  /** Micro-USD reserved by calls in flight plus the cost of finished calls not yet stored. */
  micros: number;
  /** Calls in flight plus finished calls not yet stored. */
  requests: number;
  /** Their tokens: the reserved estimate of calls in flight, the real count of finished ones. */
  tokens: number;
}

/** What a replica holds when its coordination store loses its data: reported before anyone admits again. */
export interface Holdings {
  /** Per scope (`key:<id>`, `project:<id>`, `account:<id>`). */
  outstanding: ReadonlyMap<string, Outstanding>;
  /** Concurrency leases of calls in flight, restored as they were. */
  leases: Iterable<{ keys: readonly string[]; leaseId: string }>;
  leaseTtlMs: number;
}

export const NOTHING_OUTSTANDING: Readonly<Outstanding> = Object.freeze({ micros: 0, requests: 0, tokens: 0 });

/**
 * What the durable store does not know yet, per scope: calls in flight and finished calls whose
 * request-log rows are not written. A counter that goes missing is seeded from the durable store
 * plus these amounts, so it never forgets a reservation.
 *
 * A store that can lose its data while replicas run (Redis restarted without persistence, failed
 * over to an empty replica, or evicting) fences admissions when it notices; every replica then
 * restores its leases and reports its outstanding amounts, and admissions resume once every live
 * replica has (or, for one that does not answer, after a recovery window). For a minute after
 * the loss, rate buckets (requests and tokens per minute) must be seeded before their first
 * admission: from the request log's last minute plus every replica's outstanding calls. A store
 * that is new (the database knows no epoch for it) has lost nothing and admits at once. A
 * single-process store never loses data behind its owner's back, so there are no other replicas.
 */
export interface GateRecovery {
  /** Declared once by the metering kernel: what this replica holds. */
  setHoldingsSource(source: () => Holdings): void;
  /**
   * What this replica holds changed in a way others could count twice (rows it had reported as
   * pending are now stored): a report still in force after a loss is brought up to date now.
   */
  refresh(): void;
  /** What other replicas reported for this scope since the store last lost its data (zeros when none). */
  othersOutstanding(scope: string): Promise<Outstanding>;
  /**
   * Seeds a rate bucket the loss emptied with `entry.cost` units (its admissions in the last
   * period), unless a replica seeded it already in this epoch: the first seeder wins.
   */
  seedWindow(entry: RateEntry): Promise<void>;
  /**
   * Epochs begun after a loss that this replica moved to, and admissions it held back meanwhile
   * until the other replicas had reported: both stay 0 on a store that never lost its data.
   */
  counts(): { recoveries: number; admissionsHeld: number };
}

/** A durable record of a coordination store's epoch (see StoreEpochRecord). */
export interface RecordedEpoch {
  epoch: string;
  /** Written to the store: from then on, data written under it can be lost. */
  established: boolean;
  /** Begun because the store lost its data: replicas report what they hold before admitting again. */
  afterLoss: boolean;
}

/**
 * What the database remembers of a coordination store that can lose its data (Redis): its epoch
 * and the replicas using it. A store without an epoch is new when nothing is recorded or the
 * recorded epoch was never established, and has lost its data when it was.
 */
export interface StoreEpochRecord {
  read(): Promise<RecordedEpoch | null>;
  /** Records a first epoch unless one is recorded (replicas starting together: one wins). */
  begin(epoch: string): Promise<void>;
  /** After a loss: replaces the established epoch `lost` by `next`, unless another replica did first. */
  replace(lost: string, next: string): Promise<void>;
  /** `epoch` is now in the store. */
  establish(epoch: string): Promise<void>;
  /** This replica uses the store (a heartbeat); a replica admits nothing before its first one is written. */
  heartbeat(replica: string): Promise<void>;
  /** Replicas whose last heartbeat is younger than `withinMs` (on the database's clock). */
  liveReplicas(withinMs: number): Promise<string[]>;
  forget(replica: string): Promise<void>;
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
