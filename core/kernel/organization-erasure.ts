import type { Transaction } from '../ports/database.ts';
import { defineContributionPoint } from './extension-points.ts';

/**
 * How an organisation's data is removed when its deletion runs (the account plugin's durable job,
 * after the grace period): each plugin that keeps rows about an organisation contributes one eraser
 * for its own tables, so the deletion knows none of them. Every eraser runs in the one transaction
 * that also removes the organisation's people, projects and keys, so the deletion happens whole or
 * not at all. An eraser keeps what the law requires to be kept (the credit ledger and payments are
 * accounting records: metering's eraser leaves them). What sits outside the database (blobs) cannot
 * go in the transaction: the eraser deletes the rows and enqueues in `tx` a durable job that removes
 * the rest once the transaction has committed (support's files). Secrets in the vault go through
 * `vault.within(tx)`. test/plugins/account/account-erasure.test.ts fails on any table naming an
 * organisation that keeps a row of it, outside its documented keep-list.
 */
export interface OrganizationEraser {
  /** What it removes, as the deletion's result lists it: `request logs`, `audit log`. */
  readonly name: string;
  /** Deletes the organisation's rows of this plugin; returns how many went. Inside, use only `tx`. */
  erase(tx: Transaction, organizationId: string): Promise<number>;
}

export const OrganizationErasersPoint = defineContributionPoint<OrganizationEraser>('organization.erasers');
