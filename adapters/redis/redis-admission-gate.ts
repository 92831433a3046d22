import { randomUUID } from 'node:crypto';
import {
  type AdmissionGate,
  type GateRecovery,
  type GateRequest,
  type GateResult,
  type GateSettlement,
  type Holdings,
  NOTHING_OUTSTANDING,
  type Outstanding,
  type RateEntry,
  type StoreEpochRecord,
} from '../../core/ports/coordination.ts';
import { assertConsumeEntry, assertRateEntry } from '../memory/gcra.ts';
import { assertAllowanceAmount, wholeTtlMs } from '../memory/ttl.ts';
import type { RedisClient } from './redis-client.ts';
import { CommandDeadlines } from './redis-command-deadlines.ts';
import { RedisStoreEpoch } from './redis-epoch.ts';
import { redisKeyNames, type RedisKeyNames } from './redis-key-names.ts';
import { readDecisions } from './redis-rate-limiter.ts';
import { EPOCH_CHECK, EPOCH_LOSS_TTL_MS, GATE_ADMIT, GATE_SETTLE, GATE_STATUS, integerReply, KEY_TTL_SLACK_MS, LEASE_RESTORE, runScript, WINDOW_SEED } from './redis-scripts.ts';

export interface RedisGateOptions {
  /**
   * After the server lost its data, the longest admissions wait for every live replica to report
   * (see GateRecovery); they resume as soon as all have.
   */
  recoveryWindowMs: number;
  /** How long a replica's report outlives its last refresh: longer than any call can run. */
  outstandingTtlMs: number;
  /** The database's memory of the store's epoch and of the replicas using it. */
  epochs: StoreEpochRecord;
  /** Tells every replica to look at the store's epoch now (see nudge()), rather than at its next watch tick. */
  announce(): Promise<void>;
}

/** Admissions that find a new epoch: more rounds than this mean the data keeps vanishing. */
const RESET_ROUNDS = 3;
/** Rate windows a loss emptied are re-seeded for this long after it: the longest window metering uses. */
const RESEED_HORIZON_MS = 60_000;
/** Replicas write a heartbeat to the database this often at least, and count as live for three of them. */
const MIN_HEARTBEAT_MS = 1_000;
const LIVE_HEARTBEATS = 3;

/**
 * The admission gate as one script per phase: a call costs one Redis round trip to admit and one to
 * settle, each bounded by CommandDeadlines rather than by a timer of its own. Every admission is
 * fenced on the store's epoch (redis-epoch.ts), and a watch notices a new epoch within a quarter
 * of the recovery window even on a replica that admits nothing. A new
 * store (the database knows no epoch) admits at once. After a loss, each replica restores the
 * leases of its calls in flight and reports what they and its unwritten request-log rows hold
 * before anyone admits against re-seeded counters, and keeps that report current on every watch
 * tick until it holds nothing; for a minute, each rate bucket is re-seeded before its first
 * admission (the `unseeded` refusal).
 */
export class RedisAdmissionGate implements AdmissionGate {
  private readonly names: RedisKeyNames;
  private readonly storeEpoch: RedisStoreEpoch;
  /** The per-call scripts' bound on an unanswered command (one interval for all of them). */
  private readonly deadlines: CommandDeadlines;
  /** The epoch admissions are fenced on ('' until this replica has seen one). */
  private epoch = '';
  private syncing: Promise<boolean> | null = null;
  /** Scopes this replica's last report named (to clear the ones that drop to nothing). */
  private reported = new Set<string>();
  private refreshing: Promise<void> | null = null;
  private refreshAgain = false;
  private source: () => Holdings = () => ({ outstanding: new Map(), leases: [], leaseTtlMs: 1 });
  private readonly replicaId = randomUUID();
  private readonly watch: NodeJS.Timeout;
  /** When this replica's last heartbeat reached the database; 0 until one has, and no other replica counts it live. */
  private lastHeartbeat = 0;
  /** The heartbeat under way, shared by the watch and a sync that needs this replica registered. */
  private beating: Promise<void> | null = null;
  /** Until then (this process's clock), rate buckets are re-seeded before their first admission in this epoch. */
  private reseedUntil = 0;
  private readonly seeded = new Set<string>();
  private recoveries = 0;
  private admissionsHeld = 0;
  /** Waiting in watched() for the next watch tick to run to its end. */
  private tickWaiters: Array<() => void> = [];

  readonly recovery: GateRecovery = {
    setHoldingsSource: (source) => {
      this.source = source;
    },
    refresh: () => {
      if (this.reported.size === 0) return;
      // One refresh at a time, and one more after it when asked meanwhile: the last word is current.
      if (this.refreshing) {
        this.refreshAgain = true;
        return;
      }
      this.refreshing = this.report()
        .catch(() => undefined)
        .finally(() => {
          this.refreshing = null;
          if (this.refreshAgain) {
            this.refreshAgain = false;
            this.recovery.refresh();
          }
        });
    },
    othersOutstanding: async (scope) => {
      const entries = await this.client.hGetAll(this.names.outstanding(scope));
      const total = { ...NOTHING_OUTSTANDING };
      for (const [replica, value] of Object.entries(entries)) {
        if (replica === this.replicaId) continue;
        const [micros = 0, requests = 0, tokens = 0] = value.split(':').map(Number);
        total.micros += micros;
        total.requests += requests;
        total.tokens += tokens;
      }
      return total;
    },
    seedWindow: async (entry) => {
      assertRateEntry(entry);
      const markTtl = RESEED_HORIZON_MS + KEY_TTL_SLACK_MS;
      await runScript(
        this.client,
        WINDOW_SEED,
        [this.names.rate(entry.key), this.names.seeded(entry.key)],
        [this.epoch, String(entry.limit), String(entry.periodMs), String(Math.max(0, Math.ceil(entry.cost))), String(markTtl)],
      );
      this.seeded.add(entry.key);
    },
    counts: () => ({ recoveries: this.recoveries, admissionsHeld: this.admissionsHeld }),
  };

  constructor(
    private readonly client: RedisClient,
    prefix: string,
    private readonly options: RedisGateOptions,
  ) {
    this.names = redisKeyNames(prefix);
    this.storeEpoch = new RedisStoreEpoch(client, this.names, options.epochs);
    this.deadlines = new CommandDeadlines(client);
    this.watch = setInterval(
      () => {
        const waiting = this.tickWaiters;
        this.tickWaiters = [];
        void this.tick()
          .catch(() => undefined)
          .then(() => {
            for (const resolve of waiting) resolve();
          });
      },
      Math.max(10, Math.floor(options.recoveryWindowMs / 4)),
    );
    this.watch.unref();
  }

  /** Stops watching and leaves the replica registry, so a loss after this never waits for this replica. */
  async close(): Promise<void> {
    clearInterval(this.watch);
    this.deadlines.close();
    await this.options.epochs.forget(this.replicaId).catch(() => undefined);
  }

  /**
   * Another replica found the store's data lost: look now, so this replica reports what it holds
   * at once rather than at its next watch tick, and admissions everywhere resume sooner.
   */
  nudge(): void {
    void this.sync().catch(() => undefined);
  }

  /**
   * Resolves once a watch tick that started after this call has run to its end: a test that
   * asserts what the watch did (or did not do) awaits it instead of sleeping through ticks.
   */
  watched(): Promise<void> {
    return new Promise((resolve) => this.tickWaiters.push(resolve));
  }

  async admit(request: GateRequest): Promise<GateResult> {
    // A recovery under way (noticed by the watch or a nudge) decides first: until every replica
    // has reported, neither an admission nor a re-seed may count on what the store holds.
    if (this.syncing && (await this.syncing)) this.admissionsHeld += 1;
    for (let round = 0; ; round += 1) {
      const result = await this.admitOnce(request);
      if (result !== 'reset') return result;
      if (round >= RESET_ROUNDS) throw new Error('coordination store keeps losing its data: admission refused');
      if (await this.sync()) this.admissionsHeld += 1;
    }
  }

  /** Watch tick: notice a new epoch without waiting for an admission, and keep a post-reset report current. */
  private async tick(): Promise<void> {
    // The database being out must not stop the watch: a loss is still noticed, and recovery waits for the database.
    await this.heartbeat(false).catch(() => undefined);
    const [changed] = integerReply(await runScript(this.client, EPOCH_CHECK, [this.names.epoch], [this.epoch]), EPOCH_CHECK);
    if (changed === 1) await this.sync();
    else if (this.reported.size > 0) await this.report();
  }

  private heartbeat(force: boolean): Promise<void> {
    const startedAt = Date.now();
    if (!force && startedAt - this.lastHeartbeat < this.heartbeatMs()) return Promise.resolve();
    // Counted once written: a heartbeat that failed (the database out, or not yet migrated while the
    // app starts, since coordination opens first) is tried again at the next tick, not a period later.
    this.beating ??= this.options.epochs
      .heartbeat(this.replicaId)
      .then(() => {
        this.lastHeartbeat = startedAt;
      })
      .finally(() => {
        this.beating = null;
      });
    return this.beating;
  }

  private heartbeatMs(): number {
    return Math.max(MIN_HEARTBEAT_MS, this.options.recoveryWindowMs);
  }

  /** Moves to the store's current epoch (one at a time); resolves true when that meant waiting for other replicas' reports. */
  private sync(): Promise<boolean> {
    this.syncing ??= this.followEpoch().finally(() => {
      this.syncing = null;
    });
    return this.syncing;
  }

  private async followEpoch(): Promise<boolean> {
    // Registered before it admits anything: a replica no other counts as live is not waited for
    // after a loss, so re-seeds elsewhere would leave out what its calls in flight hold.
    if (this.lastHeartbeat === 0) await this.heartbeat(true);
    for (let round = 0; round <= RESET_ROUNDS; round += 1) {
      const { epoch, lostAt } = await this.storeEpoch.current();
      if (epoch === this.epoch) return false;
      if (lostAt === null) {
        // Begun without a loss (a new store): there is nothing to recover.
        this.epoch = epoch;
        return false;
      }
      this.recoveries += 1;
      this.seeded.clear();
      // Clocks kept in step (NTP) as elsewhere: past the horizon the lost windows no longer matter.
      this.reseedUntil = lostAt + RESEED_HORIZON_MS > Date.now() ? lostAt + RESEED_HORIZON_MS : 0;
      this.reported = new Set();
      await this.report(epoch);
      await this.options.announce().catch(() => undefined);
      const live = await this.options.epochs.liveReplicas(LIVE_HEARTBEATS * this.heartbeatMs());
      const ready = await this.storeEpoch.ready(epoch, this.options.recoveryWindowMs, live);
      if (ready !== 'moved') {
        this.epoch = epoch;
        return ready === 'waited';
      }
    }
    throw new Error('coordination store keeps losing its data: admission refused');
  }

  /**
   * Reports what this replica holds: the outstanding amounts per scope (hash field = this replica)
   * and, in a new epoch, the leases of its calls in flight, put back as they were; then marks the
   * epoch reported by this replica.
   */
  private async report(newEpoch?: string): Promise<void> {
    const holdings = this.source();
    if (newEpoch !== undefined) {
      const ttl = String(wholeTtlMs(holdings.leaseTtlMs, 'restored lease'));
      await Promise.all(
        [...holdings.leases].map((held) => (held.keys.length === 0 ? undefined : runScript(this.client, LEASE_RESTORE, held.keys.map(this.names.lease), [held.leaseId, ttl]))),
      );
    }
    const batch = this.client.multi();
    const now = new Set<string>();
    for (const [scope, held] of holdings.outstanding) {
      if (!holds(held)) continue;
      now.add(scope);
      batch.hSet(this.names.outstanding(scope), this.replicaId, `${held.micros}:${held.requests}:${held.tokens}`);
      batch.pExpire(this.names.outstanding(scope), this.options.outstandingTtlMs);
    }
    for (const scope of this.reported) if (!now.has(scope)) batch.hDel(this.names.outstanding(scope), this.replicaId);
    if (newEpoch !== undefined) {
      batch.sAdd(this.names.epochReported(newEpoch), this.replicaId);
      batch.pExpire(this.names.epochReported(newEpoch), EPOCH_LOSS_TTL_MS);
    }
    if (now.size > 0 || this.reported.size > 0 || newEpoch !== undefined) await batch.exec();
    this.reported = now;
  }

  /** Rate buckets of this request that the loss emptied and nobody has re-seeded yet, as far as this replica knows. */
  private unseeded(request: GateRequest): string[] {
    if (this.reseedUntil === 0) return [];
    if (Date.now() >= this.reseedUntil) {
      this.reseedUntil = 0;
      this.seeded.clear();
      return [];
    }
    const keys: string[] = [];
    const visit = (entry: RateEntry) => {
      if (!this.seeded.has(entry.key) && !keys.includes(entry.key)) keys.push(entry.key);
    };
    request.requests.forEach(visit);
    request.tokens.forEach(visit);
    return keys;
  }

  private async admitOnce(request: GateRequest): Promise<GateResult | 'reset'> {
    const { requests, tokens, leases, takes } = request;
    const unseeded = this.unseeded(request);
    if (unseeded.length > 0) return { requests: [], tokens: [], ok: false, refused: 'unseeded', keys: unseeded };
    const { rate, lease, allowance } = this.names;
    const keys: string[] = [];
    const args: string[] = [
      String(requests.length),
      String(tokens.length),
      String(leases.length),
      String(takes.length),
      request.leaseId,
      String(wholeTtlMs(request.leaseTtlMs, 'gate lease')),
      String(wholeTtlMs(request.counterTtlMs, 'gate counter')),
      this.epoch,
    ];
    for (const entry of requests) {
      assertConsumeEntry(entry);
      keys.push(rate(entry.key));
      args.push(String(entry.limit), String(entry.periodMs), String(entry.cost));
    }
    for (const entry of tokens) {
      assertConsumeEntry(entry);
      keys.push(rate(entry.key));
      args.push(String(entry.limit), String(entry.periodMs), String(entry.cost));
    }
    for (const entry of leases) {
      keys.push(lease(entry.key));
      args.push(String(entry.limit));
    }
    for (const take of takes) {
      assertAllowanceAmount(take.amount, 'take');
      if (take.headroom !== undefined) assertAllowanceAmount(take.headroom, 'headroom');
      keys.push(allowance(take.key));
      args.push(String(take.amount), take.shrink ? '1' : '0', String(take.headroom ?? 0));
    }
    keys.push(this.names.epoch);
    const { deadlines } = this;
    const reply = integerReply(await deadlines.bound(runScript(deadlines.client, GATE_ADMIT, keys, args)), GATE_ADMIT);
    const [status, first = 0, second = 0] = reply;
    if (status === GATE_STATUS.reset) return 'reset';
    const decided = { requests: readDecisions(requests, reply, 3, false), tokens: readDecisions(tokens, reply, 3 + 3 * requests.length, false) };
    const tail = reply.slice(3 + 3 * (requests.length + tokens.length));
    switch (status) {
      case GATE_STATUS.admitted:
        return { ...decided, ok: true, taken: tail };
      case GATE_STATUS.requests:
        return { ...decided, ok: false, refused: 'requests' };
      case GATE_STATUS.tokens:
        return { ...decided, ok: false, refused: 'tokens' };
      case GATE_STATUS.concurrency:
        return { ...decided, ok: false, refused: 'concurrency', fullKey: leases[first - 1]!.key };
      case GATE_STATUS.missing:
        return { ...decided, ok: false, refused: 'money', allowance: { ok: false, reason: 'missing', keys: [...new Set(tail.map((i) => takes[i - 1]!.key))] } };
      case GATE_STATUS.short:
        return { ...decided, ok: false, refused: 'money', allowance: { ok: false, reason: 'insufficient', key: takes[first - 1]!.key, remaining: second } };
      default:
        throw new Error(`unexpected reply from ${GATE_ADMIT.name}: ${JSON.stringify(reply)}`);
    }
  }

  async settle(settlement: GateSettlement): Promise<void> {
    const { leaseKeys, gives, tokens } = settlement;
    const { rate, lease, allowance } = this.names;
    const keys: string[] = [];
    const args: string[] = [String(leaseKeys.length), String(gives.length), String(tokens.length), settlement.leaseId, String(wholeTtlMs(settlement.counterTtlMs, 'gate counter'))];
    for (const key of leaseKeys) keys.push(lease(key));
    for (const give of gives) {
      assertAllowanceAmount(give.amount, 'give');
      keys.push(allowance(give.key));
      args.push(String(give.amount));
    }
    for (const entry of tokens) {
      assertRateEntry(entry);
      keys.push(rate(entry.key));
      args.push(String(entry.limit), String(entry.periodMs), String(entry.cost));
    }
    await this.deadlines.bound(runScript(this.deadlines.client, GATE_SETTLE, keys, args));
  }
}

function holds(held: Outstanding): boolean {
  return held.micros > 0 || held.requests > 0 || held.tokens > 0;
}
