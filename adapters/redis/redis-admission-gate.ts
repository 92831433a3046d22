import { randomUUID } from 'node:crypto';
import type { AdmissionGate, GateRecovery, GateRequest, GateResult, GateSettlement } from '../../core/ports/coordination.ts';
import { assertConsumeEntry, assertRateEntry } from '../memory/gcra.ts';
import { assertAllowanceAmount, wholeTtlMs } from '../memory/ttl.ts';
import type { RedisClient } from './redis-client.ts';
import { redisKeyNames, type RedisKeyNames } from './redis-key-names.ts';
import { readDecisions } from './redis-rate-limiter.ts';
import { EPOCH_CHECK, GATE_ADMIT, GATE_SETTLE, GATE_STATUS, integerReply, runScript } from './redis-scripts.ts';

export interface RedisGateOptions {
  /** After the server lost its data, how long admissions wait for every replica to report (see GateRecovery). */
  recoveryWindowMs: number;
  /** How long a replica's report outlives its last refresh: longer than any call can run. */
  outstandingTtlMs: number;
}

/** Admissions that find a new epoch: report, wait out the window, try again; more rounds mean the data keeps vanishing. */
const RESET_ROUNDS = 3;

/**
 * The admission gate as one script per phase: a call costs one Redis round trip to admit and one to
 * settle. Every admission is fenced on the store's epoch (redis-scripts.ts EPOCH_FUNCTIONS), and a
 * watch notices a new epoch within a quarter of the recovery window even on a replica that admits
 * nothing, so a replica whose calls are still running reports their reservations before anyone
 * admits against re-seeded counters. After a reset the replica keeps its report current on every
 * watch tick (reservations settle, rows get written) until it holds nothing.
 */
export class RedisAdmissionGate implements AdmissionGate {
  private readonly names: RedisKeyNames;
  /** The epoch this replica has reported to ('' until it has seen one). */
  private epoch = '';
  private recovering: Promise<void> | null = null;
  /** Scopes this replica's last report named (to clear the ones that drop to nothing). */
  private reported = new Set<string>();
  private source: () => ReadonlyMap<string, number> = () => new Map();
  private readonly replicaId = randomUUID();
  private readonly watch: NodeJS.Timeout;
  /** Waiting in watched() for the next watch tick to run to its end. */
  private tickWaiters: Array<() => void> = [];

  readonly recovery: GateRecovery = {
    setOutstandingSource: (source) => {
      this.source = source;
    },
    othersOutstanding: async (scope) => {
      const entries = await this.client.hGetAll(this.names.outstanding(scope));
      let total = 0;
      for (const [replica, micros] of Object.entries(entries)) if (replica !== this.replicaId) total += Number(micros);
      return total;
    },
  };

  constructor(
    private readonly client: RedisClient,
    prefix: string,
    private readonly options: RedisGateOptions,
  ) {
    this.names = redisKeyNames(prefix);
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

  close(): void {
    clearInterval(this.watch);
  }

  /**
   * Resolves once a watch tick that started after this call has run to its end: a test that
   * asserts what the watch did (or did not do) awaits it instead of sleeping through ticks.
   */
  watched(): Promise<void> {
    return new Promise((resolve) => this.tickWaiters.push(resolve));
  }

  async admit(request: GateRequest): Promise<GateResult> {
    for (let round = 0; ; round += 1) {
      const result = await this.admitOnce(request);
      if (result !== 'reset') return result;
      if (round >= RESET_ROUNDS) throw new Error('coordination store keeps losing its data: admission refused');
    }
  }

  /** Watch tick: notice a new epoch without waiting for an admission, and keep a post-reset report current. */
  private async tick(): Promise<void> {
    const reply = integerReply(await runScript(this.client, EPOCH_CHECK, [this.names.epoch, this.names.epochReady], [this.epoch, String(this.options.recoveryWindowMs)]), EPOCH_CHECK);
    if (reply[0] === 1) await this.recover(reply[1]!, 0);
    else if (this.reported.size > 0) await this.report();
  }

  /** Reports this replica's outstanding money for the new epoch, then waits until the epoch admits. */
  private recover(epoch: number, waitMs: number): Promise<void> {
    this.recovering ??= (async () => {
      try {
        this.reported = new Set();
        await this.report();
        this.epoch = String(epoch);
      } finally {
        this.recovering = null;
      }
    })();
    const reported = this.recovering;
    return waitMs > 0 ? reported.then(() => new Promise((resolve) => setTimeout(resolve, waitMs))) : reported;
  }

  private async report(): Promise<void> {
    const current = this.source();
    const batch = this.client.multi();
    for (const [scope, micros] of current) {
      if (micros <= 0) continue;
      batch.hSet(this.names.outstanding(scope), this.replicaId, String(micros));
      batch.pExpire(this.names.outstanding(scope), this.options.outstandingTtlMs);
    }
    const now = new Set([...current].filter(([, micros]) => micros > 0).map(([scope]) => scope));
    for (const scope of this.reported) if (!now.has(scope)) batch.hDel(this.names.outstanding(scope), this.replicaId);
    if (now.size > 0 || this.reported.size > 0) await batch.exec();
    this.reported = now;
  }

  private async admitOnce(request: GateRequest): Promise<GateResult | 'reset'> {
    const { requests, tokens, leases, takes } = request;
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
      String(this.options.recoveryWindowMs),
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
    keys.push(this.names.epoch, this.names.epochReady);
    const reply = integerReply(await runScript(this.client, GATE_ADMIT, keys, args), GATE_ADMIT);
    const [status, first = 0, second = 0] = reply;
    if (status === GATE_STATUS.reset) {
      await this.recover(first, second);
      return 'reset';
    }
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
    await runScript(this.client, GATE_SETTLE, keys, args);
  }
}
