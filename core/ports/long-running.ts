import type { Queryable } from './database.ts';
import type { Page, PageRequest } from '../vocabulary/pagination.ts';

/**
 * Storage of long-running operations (implemented once in adapters/sql/long-running-store.ts): the
 * record a caller polls (`GET /client/operations/{id}`) while a durable job does the work. Every
 * time given here comes from the service's clock, as the job queue's do.
 */
export type OperationStatus = 'queued' | 'running' | 'succeeded' | 'failed' | 'cancelled';

export const FINISHED_STATUSES: readonly OperationStatus[] = ['succeeded', 'failed', 'cancelled'];

/** Who started an operation: a person, a key, or the service itself. */
export interface OperationStarter {
  kind: 'person' | 'key' | 'system';
  id: string;
}

export interface LongRunningOperation {
  id: string;
  organizationId: string;
  /** The project it acts in, when it acts in one (a deploy, a batch); null for the account's own. */
  projectId: string | null;
  /** What it does, e.g. `account.deletion`; names its job's queue too. */
  kind: string;
  status: OperationStatus;
  /** The durable job doing the work (core/jobs); finished jobs are pruned, the operation stays. */
  jobId: string;
  /** Not before this time: a scheduled operation (an account deletion after its grace period) waits until then. */
  runAt: Date;
  startedBy: OperationStarter | null;
  /** What the work produced, JSON; null until it succeeded. */
  result: unknown;
  /** Why it failed or was cancelled; null otherwise. */
  error: { message: string } | null;
  createdAt: Date;
  updatedAt: Date;
  finishedAt: Date | null;
}

/** Whose list, and which operations it may show. */
export interface ProgressFilter {
  /** Who lists: `person:<id>` or `key:<id>`; what one viewer hides stays listed for the others. */
  viewer: string;
  projectIds: readonly string[] | null;
  finishedSince: Date;
}

/** How an operation ends: each is written only while it has not finished yet. */
export type OperationOutcome = { status: 'succeeded'; result: unknown } | { status: 'failed' | 'cancelled'; error: string };

export interface LongRunningStore {
  insert(db: Queryable, operation: LongRunningOperation): Promise<void>;
  /** Null when it does not exist or belongs to another organisation; `db`: inside a transaction. */
  get(organizationId: string, id: string, db?: Queryable): Promise<LongRunningOperation | null>;
  /** queued or running -> running; the record, or null when it has finished (cancelled before it ran). */
  markRunning(id: string, now: Date): Promise<LongRunningOperation | null>;
  /** Ends an unfinished operation; false when it had finished already. */
  finish(db: Queryable, id: string, outcome: OperationOutcome, now: Date): Promise<boolean>;
  /** queued -> cancelled; false when it is running or finished. */
  cancelQueued(db: Queryable, id: string, error: string, now: Date): Promise<boolean>;
  /**
   * The organisation's operations newest first, as `viewer` lists them: those in `projectIds` (null:
   * every project) and those of no project, still unfinished or finished at or after
   * `finishedSince`, but none the viewer hid.
   */
  page(organizationId: string, filter: ProgressFilter, page: PageRequest): Promise<Page<LongRunningOperation>>;
  /**
   * Hides operations from `viewer`'s list: those named (of this organisation, and within the
   * filter's projects), or with 'all' every one the list shows now. Returns how many were hidden.
   */
  hide(organizationId: string, filter: ProgressFilter, which: readonly string[] | 'all', now: Date): Promise<number>;
  /** Removes the organisation's operations but those named (an account deletion keeps its own). */
  eraseForOrganization(db: Queryable, organizationId: string, keep: readonly string[]): Promise<number>;
}
