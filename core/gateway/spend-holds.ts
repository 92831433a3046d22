import type { Credential } from '../identity/credential.ts';
import { defineExtensionPoint } from '../kernel/extension-points.ts';
import type { Transaction } from '../ports/database.ts';
import type { MeteredUnits } from './inference-admission.ts';

/** One call a hold covers: its model and the upper bound of what it may use (as GatewayCalls.check answers). */
export interface HeldCall {
  model: string;
  inputTokens: number;
  maxOutputTokens: number;
  units?: MeteredUnits;
}
export interface SpendHoldRequest {
  credential: Credential;
  calls: readonly HeldCall[];
  reference: string;
}
export interface SpendHold {
  readonly id: string;
  readonly micros: bigint;
}
export interface SpendHolds {
  place<T>(request: SpendHoldRequest, within: (tx: Transaction, hold: SpendHold) => Promise<T>): Promise<T>;
  release(holdId: string): Promise<void>;
}
export const SpendHoldsPoint = defineExtensionPoint<SpendHolds>('SpendHolds');
