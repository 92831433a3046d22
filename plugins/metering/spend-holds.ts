import { randomUUID } from 'node:crypto';
import type { FastifyBaseLogger } from 'fastify';
import type { SpendHold, SpendHoldRequest, SpendHolds } from '../../core/gateway/spend-holds.ts';
import type { Credential } from '../../core/identity/credential.ts';
import { ApiError } from '../../core/kernel/errors.ts';
import type { Coordination } from '../../core/ports/coordination.ts';
import { type Database, type Transaction, UniqueViolation } from '../../core/ports/database.ts';
import type { SpendPeriod } from '../../core/ports/identity.ts';
import { creditCounterKey } from './credit-grants.ts';
import { capCounterKey, type ScopeKind } from './governed-admission.ts';
import { estimateCostMicros, type PriceSheet, unpricedUnit } from './pricing.ts';
import type { RequestLogWriter } from './request-log-writer.ts';
// Catalogues the codes this module answers with (core/kernel/error-catalogue.ts).
import './metering-errors.ts';

/*
 * Spend holds (core/gateway/spend-holds.ts), kept by metering: plugins/metering/README.md, "Spend
 * holds", says how. In short: a hold is a row in spend_holds and a take from the credit and cap
 * counters; counter seeding subtracts what open holds still hold (HoldAccounts.outstanding), so
 * the hold survives restarts and a coordination store losing its data; batch lines spend from a
 * counter of the hold's own (`hold:<organisation>:<id>`, re-seeded from the database like the
 * others), and release gives back what that counter has left.
 */

const PERIODS: readonly SpendPeriod[] = ['day', 'week', 'month', 'total'];
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** Money spend holds hold, as the admission sees it: the hooks governed-admission.ts calls. */
export interface HeldMoney {
  /**
   * What open holds in the scope still hold (their amount less what their calls' rows cost, stored
   * or queued here, never below zero), and what holds being placed or released here hold: counter
   * seeding subtracts it.
   */
  outstanding(organizationId: string, scope: ScopeKind, id: string): Promise<number>;
  /** Per scope (`key:<id>`…), holds being placed or released here: reported with the replica's holdings after a loss. */
  transient(): ReadonlyMap<string, number>;
  /** Whether the hold is open and the organisation's: a call against it spends from it. */
  isOpen(organizationId: string, holdId: string): Promise<boolean>;
  /** Spends a batch line's cost from its hold; resolves to the part the hold no longer covered. */
  spend(organizationId: string, holdId: string, micros: bigint): Promise<bigint>;
}

interface HoldRow {
  id: string;
  organization_id: string;
  project_id: string | null;
  key_id: string | null;
  maker_key_ids: string[];
  micros: bigint;
  released_at: Date | null;
  /** What request-log rows naming the hold cost. */
  spent: bigint;
}

const SPENT = '(SELECT COALESCE(sum(l.cost_micros), 0) FROM request_logs l WHERE l.hold_id = h.id)::bigint AS spent';
const HOLD_COLUMNS = `h.id, h.organization_id, h.project_id, h.key_id, h.maker_key_ids, h.micros, h.released_at, ${SPENT}`;

/** Open holds of one organisation in a scope ($2: a project or key id; a key's holds include those of keys it made). */
const SCOPE_CONDITION: Record<ScopeKind, string> = {
  account: 'TRUE',
  project: 'h.project_id = $2::uuid',
  key: '(h.key_id = $2::uuid OR $2::uuid = ANY(h.maker_key_ids))',
};

const holdCounterKey = (organizationId: string, holdId: string) => `hold:${organizationId}:${holdId}`;

/** The scopes a hold's money counts in, as admission names them. */
function scopesOf(hold: { organizationId: string; projectId: string | null; keyId: string | null; makerKeyIds: readonly string[] }): string[] {
  const scopes = [`account:${hold.organizationId}`];
  if (hold.projectId) scopes.push(`project:${hold.projectId}`);
  if (hold.keyId) scopes.push(`key:${hold.keyId}`);
  for (const maker of hold.makerKeyIds) scopes.push(`key:${maker}`);
  return scopes;
}

export interface HoldAccountsDeps {
  db: Database;
  coordination: Coordination;
  writer: RequestLogWriter;
  counterTtlMs: number;
}

/** The hold side of counter seeding and of batch lines' settlement (HeldMoney), on the database and the coordination store. */
export class HoldAccounts implements HeldMoney {
  /** By scope, micro-USD of holds placed or released here whose row does not say so yet. */
  private readonly moving = new Map<string, number>();

  constructor(private readonly deps: HoldAccountsDeps) {}

  async outstanding(organizationId: string, scope: ScopeKind, id: string): Promise<number> {
    const { rows } = await this.deps.db.query<HoldRow>(
      `SELECT ${HOLD_COLUMNS} FROM spend_holds h WHERE h.organization_id = $1::uuid AND h.released_at IS NULL AND ${SCOPE_CONDITION[scope]}`,
      scope === 'account' ? [organizationId] : [organizationId, id],
    );
    let held = this.moving.get(`${scope}:${id}`) ?? 0;
    for (const row of rows) held += this.left(row);
    return held;
  }

  transient(): ReadonlyMap<string, number> {
    return this.moving;
  }

  async isOpen(organizationId: string, holdId: string): Promise<boolean> {
    if (!UUID.test(holdId)) return false;
    const [counter] = await this.deps.coordination.allowances.peek([holdCounterKey(organizationId, holdId)]);
    if (counter !== null && counter !== undefined) return true;
    return (await this.seedCounter(organizationId, holdId)) !== null;
  }

  async spend(organizationId: string, holdId: string, micros: bigint): Promise<bigint> {
    if (micros <= 0n) return 0n;
    const { allowances } = this.deps.coordination;
    const take = [{ key: holdCounterKey(organizationId, holdId), amount: Number(micros), shrink: true }];
    let result = await allowances.take(take, this.deps.counterTtlMs);
    if (!result.ok && result.reason === 'missing') {
      await this.seedCounter(organizationId, holdId);
      result = await allowances.take(take, this.deps.counterTtlMs);
    }
    return result.ok ? micros - BigInt(result.taken[0]!) : micros;
  }

  /** A hold just stored: its counter holds all of it (what a seed would read, without the query). */
  async opened(organizationId: string, hold: SpendHold): Promise<void> {
    await this.deps.coordination.allowances.seed(holdCounterKey(organizationId, hold.id), Number(hold.micros), this.deps.counterTtlMs);
  }

  /**
   * Counts `micros` in the hold's scopes while its row does not show it (being placed, being
   * released): a counter seeded meanwhile still subtracts it. Returns the function that stops counting it.
   */
  moveIn(scopes: readonly string[], micros: number): () => void {
    for (const scope of scopes) this.moving.set(scope, (this.moving.get(scope) ?? 0) + micros);
    let done = false;
    return () => {
      if (done) return;
      done = true;
      for (const scope of scopes) {
        const left = (this.moving.get(scope) ?? 0) - micros;
        if (left === 0) this.moving.delete(scope);
        else this.moving.set(scope, left);
      }
    };
  }

  /** The hold's row, with what its calls' stored rows cost (null: no hold with that id). */
  async row(holdId: string): Promise<HoldRow | null> {
    if (!UUID.test(holdId)) return null;
    const { rows } = await this.deps.db.query<HoldRow>(`SELECT ${HOLD_COLUMNS} FROM spend_holds h WHERE h.id = $1::uuid`, [holdId]);
    return rows[0] ?? null;
  }

  /** What an open hold still holds: its amount less its calls' rows, stored or queued here; never below zero. */
  left(row: HoldRow): number {
    const left = BigInt(row.micros) - BigInt(row.spent) - this.deps.writer.pendingHeldMicros(row.id);
    return left > 0n ? Number(left) : 0;
  }

  /**
   * Takes everything a released hold's counter has left, and removes the counter (a line settling
   * later finds none, and the database says released: it pays from the counters). `ifMissing` when
   * the counter was gone already.
   */
  async drain(organizationId: string, holdId: string, ifMissing: number): Promise<number> {
    const { allowances } = this.deps.coordination;
    const key = holdCounterKey(organizationId, holdId);
    const result = await allowances.take([{ key, amount: Number.MAX_SAFE_INTEGER, shrink: true }], this.deps.counterTtlMs);
    await allowances.delete([key]);
    if (result.ok) return result.taken[0]!;
    return result.reason === 'missing' ? ifMissing : 0;
  }

  /**
   * Creates an open hold's counter from the database unless it exists (so a counter exists only for
   * an open hold); resolves to what it was seeded with, null when the organisation has no such open hold.
   */
  private async seedCounter(organizationId: string, holdId: string): Promise<number | null> {
    const row = await this.row(holdId);
    if (row === null || row.organization_id !== organizationId || row.released_at !== null) return null;
    const value = this.left(row);
    await this.deps.coordination.allowances.seed(holdCounterKey(organizationId, holdId), value, this.deps.counterTtlMs);
    return value;
  }
}

/** What placing a hold takes the money with: the admission's gate (GovernedAdmission.takeHeld). */
export interface HoldGate {
  takeHeld(credential: Credential, micros: number): Promise<string[]>;
}

export interface MeteredSpendHoldsDeps {
  db: Database;
  accounts: HoldAccounts;
  gate: HoldGate;
  coordination: Coordination;
  /** Batch prices by model (pricing.ts batchSheet). */
  batchPrices: ReadonlyMap<string, PriceSheet>;
  counterTtlMs: number;
  clock: () => Date;
  logger: FastifyBaseLogger;
}

/** SpendHolds on the metering plugin's counters and the spend_holds table. */
export class MeteredSpendHolds implements SpendHolds {
  constructor(private readonly deps: MeteredSpendHoldsDeps) {}

  async place<T>(request: SpendHoldRequest, within: (tx: Transaction, hold: SpendHold) => Promise<T>): Promise<T> {
    const { credential } = request;
    const { accounts, db } = this.deps;
    const hold: SpendHold = { id: randomUUID(), micros: this.priceOf(request) };
    const owner = ownerOf(credential);
    const counters = await this.deps.gate.takeHeld(credential, Number(hold.micros));
    // From the take until the row commits, a counter seeded here still subtracts the hold.
    const settled = accounts.moveIn(scopesOf(owner), Number(hold.micros));
    try {
      const result = await db.transaction(async (tx) => {
        await insertHold(tx, hold, owner, request.reference);
        return within(tx, hold);
      });
      await accounts
        .opened(owner.organizationId, hold)
        .catch((error: unknown) => this.deps.logger.warn({ err: error, holdId: hold.id }, 'a spend hold’s counter could not be made; it is seeded on first use'));
      return result;
    } catch (error) {
      await this.giveBack(counters, Number(hold.micros), hold.id);
      throw error;
    } finally {
      settled();
    }
  }

  async release(holdId: string): Promise<void> {
    const { accounts, db } = this.deps;
    const row = await accounts.row(holdId);
    if (!row || row.released_at !== null) return;
    const owner = { organizationId: row.organization_id, projectId: row.project_id, keyId: row.key_id, makerKeyIds: row.maker_key_ids };
    const estimate = accounts.left(row);
    // From the release's commit until the counters are given back, a counter seeded here still subtracts it.
    const settled = accounts.moveIn(scopesOf(owner), estimate);
    try {
      const { rows } = await db.query('UPDATE spend_holds SET released_at = $2 WHERE id = $1::uuid AND released_at IS NULL RETURNING id', [holdId, this.deps.clock()]);
      // Another release got there first: it gives back.
      if (rows.length === 0) return;
      const remaining = await accounts.drain(row.organization_id, holdId, estimate);
      // Never more than the stored rows leave: a line cut by a crash was billed (its provisional row) but never spent from the counter.
      const stored = await accounts.row(holdId);
      const ceiling = stored ? accounts.left({ ...stored, released_at: null }) : 0;
      await this.giveBack(countersOf(owner, this.deps.clock()), Math.min(remaining, ceiling), holdId);
    } finally {
      settled();
    }
  }

  /** The hold's amount: every call's worst case at its model's batch price. */
  private priceOf(request: SpendHoldRequest): bigint {
    let micros = 0n;
    for (const call of request.calls) {
      const sheet = this.deps.batchPrices.get(call.model);
      if (!sheet) throw new ApiError('model_not_priced', `Model ${call.model} has no prices; refusing to serve it unmetered`);
      const unpriced = unpricedUnit(call.units, sheet);
      if (unpriced) throw new ApiError('unit_not_priced', unpriced.message, { param: unpriced.param });
      micros += estimateCostMicros(call, sheet);
    }
    return micros;
  }

  /** Adds `micros` back to the counters (those that have idled out are re-read from the database instead). */
  private async giveBack(counters: string[], micros: number, holdId: string): Promise<void> {
    if (micros <= 0) return;
    try {
      await this.deps.coordination.allowances.give(
        counters.map((key) => ({ key, amount: micros })),
        this.deps.counterTtlMs,
      );
    } catch (error) {
      // The counters stay lower until they idle out and are re-read from the database: the safe way round.
      this.deps.logger.error({ err: error, holdId, micros }, 'a spend hold’s money could not be given back to the live counters');
    }
  }
}

interface HoldOwner {
  organizationId: string;
  projectId: string | null;
  keyId: string | null;
  makerKeyIds: readonly string[];
}

function ownerOf(credential: Credential): HoldOwner {
  if (credential.kind !== 'key') return { organizationId: credential.organizationId, projectId: null, keyId: null, makerKeyIds: [] };
  return { organizationId: credential.organizationId, projectId: credential.projectId, keyId: credential.keyId, makerKeyIds: credential.ancestors.map((maker) => maker.keyId) };
}

/**
 * Every counter the hold's money may sit in now: the credit balance and a cap counter per scope and
 * period. Caps may have changed since the hold was placed; a counter that does not exist is left
 * missing by give, and one made since was seeded with the hold subtracted.
 */
function countersOf(owner: HoldOwner, now: Date): string[] {
  const counters = [creditCounterKey(owner.organizationId)];
  const scopes: Array<[ScopeKind, string | null]> = [
    ['account', owner.organizationId],
    ['project', owner.projectId],
    ['key', owner.keyId],
    ...owner.makerKeyIds.map((id): [ScopeKind, string] => ['key', id]),
  ];
  for (const [scope, id] of scopes) if (id) for (const period of PERIODS) counters.push(capCounterKey(scope, id, period, now));
  return counters;
}

async function insertHold(tx: Transaction, hold: SpendHold, owner: HoldOwner, reference: string): Promise<void> {
  try {
    await tx.query(
      `INSERT INTO spend_holds (id, organization_id, project_id, key_id, maker_key_ids, micros, reference)
       VALUES ($1, $2, $3, $4, $5::uuid[], $6, $7)`,
      [hold.id, owner.organizationId, owner.projectId, owner.keyId, [...owner.makerKeyIds], hold.micros.toString(), reference],
    );
  } catch (error) {
    if (error instanceof UniqueViolation) throw new ApiError('spend_hold_exists', `A spend hold with reference ${reference} exists already`);
    throw error;
  }
}
