import type { AdmissionGate, GateRequest, GateResult, GateSettlement } from '../../core/ports/coordination.ts';
import { assertConsumeEntry, assertRateEntry } from '../memory/gcra.ts';
import { assertAllowanceAmount, wholeTtlMs } from '../memory/ttl.ts';
import type { RedisClient } from './redis-client.ts';
import { redisKeyNames, type RedisKeyNames } from './redis-key-names.ts';
import { readDecisions } from './redis-rate-limiter.ts';
import { GATE_ADMIT, GATE_SETTLE, GATE_STATUS, integerReply, runScript } from './redis-scripts.ts';

/** The admission gate as one script per phase: a call costs one Redis round trip to admit and one to settle. */
export class RedisAdmissionGate implements AdmissionGate {
  private readonly names: RedisKeyNames;

  constructor(
    private readonly client: RedisClient,
    prefix: string,
  ) {
    this.names = redisKeyNames(prefix);
  }

  async admit(request: GateRequest): Promise<GateResult> {
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
      keys.push(allowance(take.key));
      args.push(String(take.amount), take.shrink ? '1' : '0');
    }
    const reply = integerReply(await runScript(this.client, GATE_ADMIT, keys, args), GATE_ADMIT);
    const [status, first = 0, second = 0] = reply;
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
