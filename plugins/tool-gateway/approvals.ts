import { randomUUID } from 'node:crypto';
import type { DomainEvents } from '../../core/events/domain-events.ts';
import { ApiError } from '../../core/kernel/errors.ts';
import type { PubSub, Unsubscribe } from '../../core/ports/coordination.ts';
import type { Database, Transaction } from '../../core/ports/database.ts';
import type { ApprovalGate, ApprovalOutcome, ApprovalWait, ToolCallForApproval } from './approval-gate.ts';
import { type ApprovalBinding, type ApprovalStore, type McpApproval, POLICY_CHANGED } from './approval-store.ts';
import type { ToolGatewayConfig } from './tool-gateway-config.ts';
// Catalogues the codes and event types this module answers with and emits.
import './tool-gateway-errors.ts';
import './tool-gateway-events.ts';

/** One channel for every replica: the message is the approval id, matched against this replica's waiters. */
const CHANNEL = 'tool-gateway:approvals';
/** Approvals lapsed per sweep at most: a backlog is worked through over the next sweeps. */
const SWEEP_BATCH = 500;
/** Races a call can lose (its live approval used or lapsed between two statements) before it gives up. */
const MAX_RACES = 5;
const TOOL_REMOVED = 'The tool was removed from its upstream';

export interface ApprovalDeps {
  database: Database;
  store: ApprovalStore;
  pubsub: PubSub;
  events: DomainEvents;
  clock: () => Date;
  config: Pick<ToolGatewayConfig, 'approvalTtlMs' | 'approvalProgressMs' | 'approvalRecheckMs'>;
}

/** What a waiting call sleeps on: set by a wake-up, so one arriving between two reads is not lost. */
interface Waiter {
  woken: boolean;
  resolve: (() => void) | null;
}

export function approvalEventFields(approval: McpApproval) {
  return {
    approvalId: approval.id,
    projectId: approval.projectId,
    keyId: approval.keyId,
    toolId: approval.toolId,
    upstreamId: approval.upstreamId,
    gatewayName: approval.gatewayName,
    argumentsHash: approval.argumentsHash,
    requestId: approval.requestId,
  };
}

/**
 * The approval gate: pending approvals bound to the exact call (key, tool, arguments hash, the
 * tool's policy version), a call waiting for a person's decision made on any replica, each
 * approval releasing one call, and expiry as an observable deny. Decisions and lapses are written
 * first and announced after their commit (pub/sub, one channel); a waiter also reads its approval
 * again every `approvalRecheckMs`, so a lost message delays a call and never strands it.
 */
export class Approvals implements ApprovalGate {
  private readonly waiters = new Map<string, Set<Waiter>>();
  private unsubscribe: Unsubscribe | null = null;

  constructor(private readonly deps: ApprovalDeps) {}

  async start(): Promise<void> {
    this.unsubscribe = await this.deps.pubsub.subscribe(CHANNEL, (approvalId) => this.wake(approvalId));
  }

  async stop(): Promise<void> {
    const unsubscribe = this.unsubscribe;
    this.unsubscribe = null;
    // An unreachable Redis refusing the UNSUBSCRIBE must not stop the rest of the shutdown.
    await unsubscribe?.().catch(() => undefined);
  }

  /** After `tx` commits: wakes the approval's waiters here at once and on every other replica. */
  announceAfter(tx: Transaction, approvalIds: readonly string[]): void {
    if (approvalIds.length === 0) return;
    tx.afterCommit(() => {
      for (const id of approvalIds) {
        this.wake(id);
        // Lost (Redis away): the waiters elsewhere read the row again within approvalRecheckMs.
        this.deps.pubsub.publish(CHANNEL, id).catch(() => undefined);
      }
    });
  }

  async decide(call: ToolCallForApproval, wait: ApprovalWait): Promise<ApprovalOutcome> {
    const { store, clock } = this.deps;
    const version = await store.policyVersion(call.organizationId, call.toolId);
    if (version === null) throw new ApiError('mcp_tool_not_found', `No tool ${call.toolId}`);
    const binding: ApprovalBinding = { keyId: call.keyId, toolId: call.toolId, argumentsHash: call.argumentsHash, policyVersion: version };
    for (let race = 0; race < MAX_RACES; race++) {
      const now = clock();
      await this.lapseCall(binding, now);
      const used = await store.consume(binding, now);
      if (used) return { decision: 'approved', approvalId: used.id };
      const live = await this.pendingFor(call, binding, now);
      // Approved between the two statements: take it as any other call would, or lose it and ask again.
      if (live === null || live.status === 'approved') continue;
      return this.waitFor(live, call, binding, wait);
    }
    throw new Error(`approval of ${call.gatewayName}: lost ${MAX_RACES} races for its approval in a row`);
  }

  countPending(organizationId: string, projectIds: readonly string[]): Promise<number> {
    if (projectIds.length === 0) return Promise.resolve(0);
    return this.deps.store.countPending(organizationId, projectIds, this.deps.clock());
  }

  /** The periodic sweep: lapses approvals past their expiry (undecided, or approved and never used). Answers how many. */
  async expireDue(): Promise<number> {
    const lapsed = await this.deps.database.transaction(async (tx) => {
      const rows = await this.deps.store.lapse(tx, { due: this.deps.clock(), limit: SWEEP_BATCH });
      await this.emitExpired(tx, rows);
      this.announceAfter(
        tx,
        rows.map((row) => row.id),
      );
      return rows;
    });
    return lapsed.length;
  }

  /** Lapses this call's approvals that expired or were given under another policy version. */
  private async lapseCall(binding: ApprovalBinding, now: Date): Promise<void> {
    await this.deps.database.transaction(async (tx) => {
      const rows = await this.deps.store.lapse(tx, { binding, now });
      await this.emitExpired(tx, rows);
      this.announceAfter(
        tx,
        rows.map((row) => row.id),
      );
    });
  }

  private async emitExpired(tx: Transaction, rows: readonly McpApproval[]): Promise<void> {
    for (const row of rows) {
      await this.deps.events.emit(tx, {
        type: 'mcp.approval.expired',
        organizationId: row.organizationId,
        subject: row.id,
        actor: null,
        // Only an approved one has a decider: a denied one is never live, so never lapses.
        data: { ...approvalEventFields(row), wasApproved: row.decidedBy !== null, reason: row.reason },
      });
    }
  }

  /** The live approval of this exact call: the one identical calls share, or a new pending one (announced by an event). */
  private pendingFor(call: ToolCallForApproval, binding: ApprovalBinding, now: Date): Promise<McpApproval | null> {
    const { store, events, config } = this.deps;
    return this.deps.database.transaction(async (tx) => {
      const created = await store.insertPending(tx, {
        id: randomUUID(),
        organizationId: call.organizationId,
        projectId: call.projectId,
        keyId: call.keyId,
        toolId: call.toolId,
        upstreamId: call.upstreamId,
        gatewayName: call.gatewayName,
        argumentsHash: call.argumentsHash,
        policyVersion: binding.policyVersion,
        requestId: call.requestId,
        requestedAt: now,
        expiresAt: new Date(now.getTime() + config.approvalTtlMs),
      });
      if (!created) return store.live(binding, tx);
      await events.emit(tx, {
        type: 'mcp.approval.requested',
        organizationId: call.organizationId,
        subject: created.id,
        // The key asking is named in the data; the actor is for what people and keys did through the API.
        actor: null,
        data: { ...approvalEventFields(created), expiresAt: created.expiresAt.toISOString() },
      });
      return created;
    });
  }

  /**
   * Waits up to `waitMs` (real time: how long the agent's request is held) for the approval to be
   * decided, reading it at once, on every wake-up and every `approvalRecheckMs`.
   */
  private async waitFor(approval: McpApproval, call: ToolCallForApproval, binding: ApprovalBinding, wait: ApprovalWait): Promise<ApprovalOutcome> {
    const { store, clock, config } = this.deps;
    const waiter: Waiter = { woken: false, resolve: null };
    const wake = () => {
      waiter.woken = true;
      waiter.resolve?.();
    };
    this.register(approval.id, waiter);
    wait.signal.addEventListener('abort', wake);
    const started = performance.now();
    let progressAt = config.approvalProgressMs;
    let row = approval;
    let readAt = Number.NEGATIVE_INFINITY;
    try {
      for (;;) {
        // Read on a wake-up (a decision, a lapse or the agent gone) and every approvalRecheckMs; a progress tick alone reads nothing.
        if (performance.now() - readAt >= config.approvalRecheckMs || waiter.woken) {
          waiter.woken = false;
          readAt = performance.now();
          const read = await store.get(call.organizationId, approval.id);
          // The tool was removed (its approvals went with it): the call cannot run.
          if (!read) return { decision: 'expired', approvalId: approval.id, reason: TOOL_REMOVED };
          row = read;
          if (row.status === 'denied' || row.status === 'expired') return { decision: row.status, approvalId: row.id, reason: row.reason };
          if (row.status === 'approved') return this.release(row, call, binding);
          if (row.expiresAt <= clock()) {
            // Undecided in time: lapse it here rather than wait for the sweep, then read what it became.
            await this.lapseCall(binding, clock());
            readAt = Number.NEGATIVE_INFINITY;
            continue;
          }
        }
        const elapsed = performance.now() - started;
        if (elapsed >= wait.waitMs || wait.signal.aborted) return { decision: 'pending', approvalId: row.id, expiresAt: row.expiresAt };
        if (wait.onWaiting && elapsed >= progressAt) {
          await wait.onWaiting(row.id, Math.round(elapsed));
          progressAt = elapsed + config.approvalProgressMs;
        }
        const untilRead = readAt + config.approvalRecheckMs - performance.now();
        const until = Math.min(wait.waitMs - elapsed, wait.onWaiting ? progressAt - elapsed : Number.POSITIVE_INFINITY, untilRead);
        await this.sleep(waiter, Math.max(0, until));
      }
    } finally {
      wait.signal.removeEventListener('abort', wake);
      this.unregister(approval.id, waiter);
    }
  }

  /**
   * An approval releases one call: the waiter that marks it used runs; one that comes second (an
   * identical call that shared the pending approval) asks for a new approval and answers pending.
   */
  private async release(approval: McpApproval, call: ToolCallForApproval, binding: ApprovalBinding): Promise<ApprovalOutcome> {
    const current = await this.deps.store.policyVersion(call.organizationId, call.toolId);
    if (current === null) return { decision: 'expired', approvalId: approval.id, reason: TOOL_REMOVED };
    if (current !== approval.policyVersion) {
      // The policy changed while the call waited: what was approved is not what would run.
      await this.lapseCall({ ...binding, policyVersion: current }, this.deps.clock());
      return { decision: 'expired', approvalId: approval.id, reason: POLICY_CHANGED };
    }
    const now = this.deps.clock();
    if (approval.usedAt === null && (await this.deps.store.consumeById(approval.id, now))) return { decision: 'approved', approvalId: approval.id };
    for (let race = 0; race < MAX_RACES; race++) {
      const next = await this.pendingFor(call, binding, this.deps.clock());
      if (next?.status === 'pending') return { decision: 'pending', approvalId: next.id, expiresAt: next.expiresAt };
      // Another identical call got an approval in between: it is theirs to use, or ours if we are first.
      if (next?.status === 'approved' && (await this.deps.store.consumeById(next.id, this.deps.clock()))) return { decision: 'approved', approvalId: next.id };
    }
    throw new Error(`approval of ${call.gatewayName}: lost ${MAX_RACES} races for its approval in a row`);
  }

  /** Sleeps `ms`, or less when woken; the wake-up stays marked on the waiter for the loop to read. */
  private sleep(waiter: Waiter, ms: number): Promise<void> {
    if (waiter.woken) return Promise.resolve();
    return new Promise((resolve) => {
      const timer = setTimeout(done, ms);
      function done() {
        clearTimeout(timer);
        waiter.resolve = null;
        resolve();
      }
      waiter.resolve = done;
    });
  }

  private wake(approvalId: string): void {
    for (const waiter of this.waiters.get(approvalId) ?? []) {
      waiter.woken = true;
      waiter.resolve?.();
    }
  }

  private register(approvalId: string, waiter: Waiter): void {
    const set = this.waiters.get(approvalId) ?? new Set<Waiter>();
    set.add(waiter);
    this.waiters.set(approvalId, set);
  }

  private unregister(approvalId: string, waiter: Waiter): void {
    const set = this.waiters.get(approvalId);
    set?.delete(waiter);
    if (set?.size === 0) this.waiters.delete(approvalId);
  }
}
