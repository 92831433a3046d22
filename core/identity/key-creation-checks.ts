import type { ErrorCode } from '../kernel/error-catalogue.ts';
import { defineContributionPoint } from '../kernel/extension-points.ts';
import type { Queryable } from '../ports/database.ts';

/**
 * A plugin's say on whether an API key may be created in a project (the tool gateway refuses one
 * in a project whose tool bundles run with full access). The keys plugin asks every check inside
 * the transaction that creates the key, and knows nothing of why one refuses.
 */
export interface KeyCreationCheck {
  /** Which plugin's, for error messages. */
  readonly name: string;
  /** The codes `check` may refuse with: the key-creating operation declares them. */
  readonly errors: readonly ErrorCode[];
  /** Throws an ApiError (one of `errors`) to refuse a key in this project. */
  check(tx: Queryable, target: { organizationId: string; projectId: string }): Promise<void>;
}

export const KeyCreationChecksPoint = defineContributionPoint<KeyCreationCheck>('KeyCreationChecks');
