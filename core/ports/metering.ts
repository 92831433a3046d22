import type { Queryable, Transaction } from './database.ts';
import type { Page, PageRequest } from '../vocabulary/pagination.ts';
import type { MeteredUnits } from '../gateway/inference-admission.ts';
import type { ErrorCode } from '../kernel/error-catalogue.ts';
import { defineExtensionPoint } from '../kernel/extension-points.ts';
import type { SpendReader, SpendWindows } from './identity.ts';

/**
 * The credit ledger: append-only lines whose balance_after chains exactly, per organisation. A
 * `promotion` (a redeemed promotion code) is an adjustment in the summary: not money paid.
 */
export type LedgerKind = 'payment' | 'adjustment' | 'promotion' | 'ai_usage' | 'hosting' | 'hosting_base_fee';

/** The kinds the summary counts as adjustments (signed). */
export const ADJUSTMENT_KINDS: readonly LedgerKind[] = ['adjustment', 'promotion'];

export interface LedgerLine {
  id: string;
  organizationId: string;
  kind: LedgerKind;
  /** Signed: credits positive, charges negative. */
  amountMicros: bigint;
  balanceAfterMicros: bigint;
  note: string | null;
  reference: string | null;
  coversUtcDay: string | null;
  coversEntries: number | null;
  createdAt: Date;
}

export interface NewLedgerLine {
  kind: LedgerKind;
  amountMicros: bigint;
  note?: string | null;
  /** Idempotency: a second line with the same organisation, kind and reference is refused. */
  reference?: string | null;
  coversUtcDay?: string | null;
  coversEntries?: number | null;
}

export interface LedgerSummary {
  openingMicros: bigint;
  paymentsMicros: bigint;
  adjustmentsMicros: bigint;
  hostingMicros: bigint;
  aiMicros: bigint;
  closingMicros: bigint;
}

/** Which ledger lines: of these kinds, created in [from, to). */
export interface LedgerFilter {
  kinds?: LedgerKind[] | undefined;
  from?: Date | undefined;
  to?: Date | undefined;
}

export interface CreditLedger {
  /** Creates the balance with its opening credit once; later calls change nothing. */
  ensureAccount(organizationId: string, initialCreditMicros: bigint): Promise<void>;
  /** Appends a line and moves the balance in one transaction; null when the reference was used already. */
  append(organizationId: string, line: NewLedgerLine, tx?: Queryable): Promise<LedgerLine | null>;
  balance(organizationId: string): Promise<bigint | null>;
  /** Newest first; `to` exclusive. */
  lines(organizationId: string, filter: LedgerFilter & { limit: number }): Promise<LedgerLine[]>;
  /** The same lines a page at a time (core/vocabulary/pagination.ts). */
  page(organizationId: string, filter: LedgerFilter, page: PageRequest): Promise<Page<LedgerLine>>;
  summary(organizationId: string, window: { from?: Date; to?: Date }): Promise<LedgerSummary>;
}

/**
 * Codes a request-log row may carry that no response was sent with: the client went away first
 * (499), or the process died before the call settled (the billing journal's provisional row).
 */
export const UNANSWERED_CALL_CODES = ['client_closed_request', 'gateway_interrupted'] as const;

/** A request-log row's error code: a catalogued one (what the client was answered), or one of UNANSWERED_CALL_CODES. */
export type RequestLogErrorCode = ErrorCode | (typeof UNANSWERED_CALL_CODES)[number];

/** One metered call, as the request-log writer stores it. */
export interface RequestLogRow {
  id: string;
  organizationId: string;
  projectId: string | null;
  keyId: string | null;
  /**
   * Not stored: the keys that made keyId, whose caps count this cost too; the request-log writer
   * counts it as theirs while the row waits to be written.
   */
  makerKeyIds?: readonly string[];
  endpoint: string;
  model: string | null;
  provider: string | null;
  upstreamModel: string | null;
  statusCode: number;
  errorCode: RequestLogErrorCode | null;
  inputTokens: number;
  cachedInputTokens: number;
  cacheWriteTokens: number;
  outputTokens: number;
  reasoningTokens: number;
  usageEstimated: boolean;
  /** What the call used besides tokens (absent: none); audio seconds as billed, whole seconds. */
  units?: MeteredUnits | undefined;
  costMicros: bigint;
  /** The units' share of costMicros (absent: none). */
  unitsCostMicros?: bigint | undefined;
  priceVersion: string | null;
  latencyMs: number;
  ttftMs: number | null;
  streamed: boolean;
  attempts: number;
  createdAt: Date;
  /** A batch line's spend hold (core/gateway/spend-holds.ts) and batch; absent for other calls. */
  holdId?: string | undefined;
  batchId?: string | undefined;
  bodies: { request: unknown; response: unknown } | null;
}

export interface UsageRecorder {
  /**
   * Stores a batch of calls and charges each organisation's balance for them, in one transaction:
   * request rows (idempotent on id; a provisional row stored for a call that had not settled is
   * replaced by the call's own row), one ai_usage ledger line per organisation for what the batch
   * added, bodies where given. Returns how many rows were new or replaced a provisional one.
   */
  record(rows: RequestLogRow[]): Promise<number>;
}

// ---- Reading the request log -------------------------------------------------------------------

/** Which rows a caller may see: projectIds null means every row of the organisation. */
export interface Visibility {
  organizationId: string;
  projectIds: readonly string[] | null;
}

export interface UsageFilter {
  visibility: Visibility;
  /** Inclusive. */
  from?: Date;
  /** Exclusive. */
  to?: Date;
  keyId?: string;
  /** Only calls of this project (within what visibility allows: a project outside it matches nothing). */
  projectId?: string;
}

export type Band = 'errors' | 'slow';

export interface RequestFilter extends UsageFilter {
  model?: string;
  q?: string;
  band?: Band;
}

/** A stored call: what the writer stored, read back (bodies live in their own table). */
export type RequestLog = Omit<RequestLogRow, 'bodies'>;

/** Token, unit and cost sums shared by totals and series buckets. */
export interface CallSums {
  requests: number;
  errors: number;
  inputTokens: number;
  cachedInputTokens: number;
  cacheWriteTokens: number;
  outputTokens: number;
  reasoningTokens: number;
  webSearches: number;
  images: number;
  characters: number;
  audioSeconds: number;
  costMicros: bigint;
  /** The units' share of costMicros; the rest is the tokens'. */
  unitsCostMicros: bigint;
}

export interface UsageTotals extends CallSums {
  avgLatencyMs: number | null;
  p50LatencyMs: number | null;
  p95LatencyMs: number | null;
}

export interface ModelTotals extends UsageTotals {
  model: string | null;
}

export type Granularity = 'hour' | 'day';

export interface SeriesBucket extends CallSums {
  start: Date;
}

/** One model's share of one bucket (only pairs with calls). */
export interface ModelSeriesBucket extends CallSums {
  start: Date;
  model: string | null;
}

export interface WindowStats {
  requests: number;
  errors: number;
  costMicros: bigint;
  p50LatencyMs: number | null;
  p95LatencyMs: number | null;
  p50TtftMs: number | null;
}

export interface WindowBucket extends WindowStats {
  start: Date;
}

export interface RequestBodies {
  request: unknown;
  response: unknown;
}

/**
 * The request log's read side. The request log is metering's table (its writer, its columns, its
 * migrations): other plugins (usage) read it through this port, never its SQL. Every read filters
 * an organisation (and the projects the caller sees) first.
 */
export interface RequestLogReader {
  totals(filter: UsageFilter): Promise<UsageTotals>;
  /** Per model, costliest first. */
  byModel(filter: UsageFilter): Promise<ModelTotals[]>;
  /** UTC hour or day buckets over [from, to), newest first, empty ones included. */
  series(filter: UsageFilter & { from: Date; to: Date }, granularity: Granularity): Promise<SeriesBucket[]>;
  /** The same window's calls split by model: one entry per bucket and model that had calls, in no set order. */
  seriesByModel(filter: UsageFilter & { from: Date; to: Date }, granularity: Granularity): Promise<ModelSeriesBucket[]>;
  /** One page of rows, newest first (created_at, then id, both descending). */
  page(filter: RequestFilter, page: PageRequest): Promise<Page<RequestLog>>;
  /** The latest rows, at most `limit`, newest first. */
  list(filter: RequestFilter, limit: number): Promise<RequestLog[]>;
  /** One row, or null when it does not exist or lies outside what the caller sees. */
  get(visibility: Visibility, id: string): Promise<RequestLog | null>;
  /** Stored prompt and response, or null when nothing was logged for the call. */
  bodies(id: string): Promise<RequestBodies | null>;
  /** Totals and per-minute buckets (newest first, empty ones included) over [from, to); both minute-aligned. */
  window(filter: UsageFilter & { from: Date; to: Date }): Promise<{ totals: WindowStats; buckets: WindowBucket[] }>;
}

/** What nothing metered spent: the spend windows where no metering plugin provides a reader. */
export const nothingSpent: SpendReader = {
  forKey: async () => NO_SPEND,
  forProject: async () => NO_SPEND,
  forOrganization: async () => NO_SPEND,
  recentCalls: async () => ({ requests: 0, tokens: 0 }),
};
const NO_SPEND: SpendWindows = Object.freeze({ totalMicros: 0n, todayMicros: 0n, weekMicros: 0n, monthMicros: 0n });

/** Spend windows read from the request log: the metering plugin provides them; with none, nothing was spent. */
export const SpendReaderPoint = defineExtensionPoint<SpendReader>('SpendReader', { default: nothingSpent });

/** The metering plugin provides the reader in register(); readers get it in operations(). */
export const RequestLogReaderPoint = defineExtensionPoint<RequestLogReader>('RequestLogReader');

/**
 * Charges made outside a gateway call (a day of app hosting): lines of negative amount written
 * together, with `alsoInTransaction`'s writes, in one transaction; a line whose reference the ledger
 * already holds is skipped (null in the answer), so a replayed charge posts once. The admission's
 * live credit counter is moved by what was recorded once the transaction committed.
 */
export interface CreditCharges {
  charge(organizationId: string, lines: readonly NewLedgerLine[], alsoInTransaction?: (tx: Transaction) => Promise<void>): Promise<Array<LedgerLine | null>>;
  /** The balance now; null before the organisation's first ledger line. */
  balance(organizationId: string): Promise<bigint | null>;
}

/** The metering plugin provides it in register(); without metering nothing is charged (undefined). */
export const CreditChargesPoint = defineExtensionPoint<CreditCharges>('CreditCharges');
