import type { Credential } from '../identity/credential.ts';
import { defineExtensionPoint } from '../kernel/extension-points.ts';
import type { Transaction } from '../ports/database.ts';
import type { MeteredUnits } from './inference-admission.ts';

/*
 * Money held for work that outlives a request (a batch): taken from the credit balance and every
 * blocking spend cap when the work is accepted, kept durably while it runs (hours, across restarts
 * and a coordination store losing its data), spent by the work's calls instead of each reserving
 * again, and what they did not spend given back when it ends. plugins/metering/README.md
 * ("Spend holds") says how the metering plugin keeps it.
 */

/** One call a hold covers: its model and the upper bound of what it may use (as GatewayCalls.check answers). */
export interface HeldCall {
  model: string;
  inputTokens: number;
  maxOutputTokens: number;
  units?: MeteredUnits;
}

export interface SpendHoldRequest {
  /** The API key the calls will run as. */
  credential: Credential;
  /** Priced at each model's batch price, summed. */
  calls: readonly HeldCall[];
  /** Unique, e.g. `batch:<uuid>`. */
  reference: string;
}

export interface SpendHold {
  readonly id: string;
  readonly micros: bigint;
}

export interface SpendHolds {
  /**
   * Takes the calls' worst-case cost from the credit balance and every blocking cap of the credential at once
   * (402 `budget_exceeded` / `insufficient_credit` as live admission words them, naming the held amount), and
   * stores the hold durably: `within(tx, hold)` runs in the same database transaction as the hold's row, so the
   * caller's rows (the batch) and the hold commit together; if `within` or the commit fails, the take is given back.
   */
  place<T>(request: SpendHoldRequest, within: (tx: Transaction, hold: SpendHold) => Promise<T>): Promise<T>;
  /** Ends the hold: what its calls did not spend goes back to the balance and caps. Idempotent; survives restarts. */
  release(holdId: string): Promise<void>;
}

/** Provided by the metering plugin; absent without it (nothing is metered, so nothing is held). */
export const SpendHoldsPoint = defineExtensionPoint<SpendHolds>('SpendHolds');
