import { randomBytes } from 'node:crypto';
import { closeSync, futimesSync, mkdirSync, openSync, readdirSync, readFileSync, readlinkSync, renameSync, rmdirSync, statSync, unlinkSync, writeFileSync, writeSync } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';
import type { FastifyBaseLogger } from 'fastify';
import type { RequestLogRow, UsageRecorder } from '../../core/ports/metering.ts';
import { requestLogErrorCode } from './request-log-error-codes.ts';
import type { MeteredUnits } from '../../core/gateway/inference-admission.ts';
import { COLUMNS, COLUMNS_BEFORE_UNITS, COLUMNS_WITHOUT_HOLD, rowValues, unitsFromColumns } from './request-log-row-values.ts';

/**
 * What survives the gateway's process dying with request-log rows still queued in memory: every
 * call is appended to a local file (one synchronous write on an O_APPEND descriptor, no fsync) as a
 * provisional row when it is admitted, before it is sent upstream, and as its own row when it is
 * settled. So a call the upstream may have served is on disk before the upstream sees a byte of
 * it, whenever the process dies after. The kernel keeps what was written when the process is
 * killed; it is lost only if the machine itself fails before writeback (see README, Money, and
 * plugins/metering/README.md).
 *
 * Layout: one folder per database (its journal_identity), in it per process instance an owner
 * record `<instance>.owner` (whose mtime is a heartbeat) and segments `<instance>.<seq>.seg` of one
 * JSON record per line. A segment is closed past `segmentBytes` and deleted once every row in it is
 * in the database. On start, and every few seconds after, segments whose owner is gone (see
 * ownerIsGone) are claimed by renaming them to `<claimer>.claimed.<name>` (one rename wins when
 * replicas race), replayed through the same UsageRecorder as the writer's flush (rows idempotent on
 * request id, a stored provisional row superseded by the call's own row, the ledger charged only
 * for what changed), then deleted. Neither the order of the lines nor that of the replays matters:
 * a call's own row wins over its provisional one whichever is read or stored first.
 */
export interface JournalSettings {
  /** The journal's root; each database gets a folder in it. */
  root: string;
  /** A segment is closed, and a new one begun, once it holds this many bytes. */
  segmentBytes: number;
  /** Rows per transaction when replaying. */
  batchSize: number;
}

export interface RecoveryReport {
  /** Segments of gone processes replayed. */
  segments: number;
  /** Calls found in them (a call's provisional and final records count once). */
  calls: number;
  /** Of those, rows that were not in the database yet (and so were charged now). */
  inserted: number;
  /** Lines that could not be read (a write torn by the kill) and were skipped. */
  unreadableLines: number;
}

/**
 * A call admitted and never settled (the process died): billed its counted input with this code.
 * Only provisional rows carry it, so a stored row with it is one a call's own row may supersede.
 */
export const INTERRUPTED_ERROR_CODE = 'gateway_interrupted';

/** Heartbeat of the owner record, and how old it may grow before a process we cannot probe counts as gone. */
const HEARTBEAT_MS = 1_000;
const STALE_AFTER_MS = 5_000;
/** How often a running gateway looks for segments of gone processes (other replicas). */
const SCAN_MS = 5_000;
const SEGMENT = /^([0-9a-f]+)\.(\d+)\.seg$/;
const OWNER_SUFFIX = '.owner';
const CLAIMED = '.claimed.';
/** Journals open in this process: alive whatever their pid says (tests run several in one process). */
const openHere = new Set<string>();

// ---- Records --------------------------------------------------------------------------------

/** A call's own row, or a provisional one (what the call is billed if it never settles). */
type RecordKind = 'row' | 'started';

/**
 * One line: [kind, …the row's fields in the request log's own order (rowValues: money as a decimal
 * string, times as epoch milliseconds), bodies]. Bodies are present only when the account keeps
 * them, i.e. when they would be stored anyway. Records written before units were metered have the
 * first 23 fields only (COLUMNS_BEFORE_UNITS) and are still read; only a batch line's row has the last
 * two columns (hold and batch, see rowValues). Provisional rows are written as `admitted` records
 * (encodeAdmitted); a full `started` row is what journals written before that hold.
 */
export function encodeRecord(kind: RecordKind, r: RequestLogRow): string {
  const values = rowValues(r, [kind]);
  values.push(r.bodies);
  return `${JSON.stringify(values)}\n`;
}

/** Kind, the row's columns, bodies: a batch line's, any other row's, and before the unit columns were added. */
const FIELDS_WITH_HOLD = COLUMNS.length + 2;
const FIELDS = COLUMNS_WITHOUT_HOLD + 2;
const FIELDS_BEFORE_UNITS = COLUMNS_BEFORE_UNITS + 2;
const isText = (v: unknown): v is string => typeof v === 'string';
const isTextOrNull = (v: unknown): v is string | null => v === null || typeof v === 'string';
const isCount = (v: unknown): v is number => Number.isInteger(v);

/** What every call of one credential to one model and endpoint shares: made once, reused per call. */
export interface CallContext {
  readonly organizationId: string;
  readonly projectId: string | null;
  readonly keyId: string | null;
  readonly endpoint: string;
  readonly model: string;
  readonly priceVersion: string;
  readonly streamed: boolean;
  /** A batch line's spend hold and batch (absent for other calls): a provisional row counts against its hold. */
  readonly holdId?: string | undefined;
  readonly batchId?: string | undefined;
}

/** A call admitted and about to be sent upstream: what it is billed if its process dies before it settles. */
export interface ProvisionalCall {
  id: string;
  context: CallContext;
  /** Its input as counted locally. */
  inputTokens: number;
  /** The units of its input counted from the request (characters, audio seconds); absent: none. */
  units?: MeteredUnits | undefined;
  /** What that input costs. */
  costMicros: bigint;
  /** The units' share of costMicros (absent with no units). */
  unitsCostMicros?: bigint | undefined;
  createdAt: Date;
}

/**
 * The row a provisional call is billed as: its input, none of its output (unknown), marked
 * estimated, status 500 `gateway_interrupted` (see plugins/metering/README.md).
 */
export function provisionalRow(call: ProvisionalCall): RequestLogRow {
  const { context } = call;
  return {
    id: call.id,
    organizationId: context.organizationId,
    projectId: context.projectId,
    keyId: context.keyId,
    endpoint: context.endpoint,
    model: context.model,
    provider: null,
    upstreamModel: null,
    statusCode: 500,
    errorCode: INTERRUPTED_ERROR_CODE,
    inputTokens: call.inputTokens,
    cachedInputTokens: 0,
    cacheWriteTokens: 0,
    outputTokens: 0,
    reasoningTokens: 0,
    usageEstimated: true,
    units: call.units,
    costMicros: call.costMicros,
    unitsCostMicros: call.unitsCostMicros,
    priceVersion: context.priceVersion,
    latencyMs: 0,
    ttftMs: null,
    streamed: context.streamed,
    attempts: 0,
    createdAt: call.createdAt,
    ...(context.holdId === undefined ? {} : { holdId: context.holdId, batchId: context.batchId }),
    bodies: null,
  };
}

/** The context's part of an `admitted` record, encoded once per context (it outlives many calls). */
const encodedContexts = new WeakMap<CallContext, string>();

function encodedContext(c: CallContext): string {
  let json = encodedContexts.get(c);
  if (json === undefined) {
    json = JSON.stringify([c.organizationId, c.projectId, c.keyId, c.endpoint, c.model, c.priceVersion, c.streamed]).slice(1, -1);
    encodedContexts.set(c, json);
  }
  return json;
}

/**
 * A provisional call as one line: ["admitted", id, organization, project, key, endpoint, model,
 * price version, streamed, input tokens, cost as a decimal string, created at in epoch
 * milliseconds], then, for a call with input units, those units (an object) and their share of
 * the cost (a decimal string); for a batch line, then its hold id and batch id (the units as null and
 * "0" when it has none). Half a full row, and all but four values encoded once per context:
 * the second write per call costs little more than its write() (see bench/billing-journal.ts).
 */
export function encodeAdmitted(call: ProvisionalCall): string {
  const { holdId, batchId } = call.context;
  // A batch line's record adds its hold and batch after the units (null and "0" when it has none).
  const hold = holdId === undefined ? '' : `,${JSON.stringify(holdId)},${JSON.stringify(batchId ?? null)}`;
  const units = call.units ? `,${JSON.stringify(call.units)},"${call.unitsCostMicros ?? 0n}"` : hold && ',null,"0"';
  return `["admitted",${JSON.stringify(call.id)},${encodedContext(call.context)},${call.inputTokens},"${call.costMicros}",${call.createdAt.getTime()}${units}${hold}]\n`;
}

const ADMITTED_FIELDS = 12;
const ADMITTED_FIELDS_WITH_UNITS = 14;
const ADMITTED_FIELDS_WITH_HOLD = 16;
const isMicros = (v: unknown): v is string => typeof v === 'string' && /^-?\d+$/.test(v);

/** The input units of an `admitted` record: whole non-negative counts of characters and audio seconds. */
function decodeInputUnits(v: unknown): MeteredUnits | null {
  if (v === null || typeof v !== 'object' || Array.isArray(v)) return null;
  const { characters, audioSeconds, ...rest } = v as Record<string, unknown>;
  if (Object.keys(rest).length > 0) return null;
  const units: MeteredUnits = {};
  for (const [name, value] of [
    ['characters', characters],
    ['audioSeconds', audioSeconds],
  ] as const) {
    if (value === undefined) continue;
    if (!isCount(value) || value < 0) return null;
    units[name] = value;
  }
  return units;
}

function decodeAdmitted(v: unknown[]): RequestLogRow | null {
  let units: MeteredUnits | undefined;
  let unitsCostMicros: bigint | undefined;
  let hold: { holdId: string; batchId: string | undefined } | undefined;
  if (v.length === ADMITTED_FIELDS_WITH_HOLD) {
    if (!isText(v[14]) || !isTextOrNull(v[15])) return null;
    hold = { holdId: v[14], batchId: v[15] ?? undefined };
  }
  if (v.length === ADMITTED_FIELDS_WITH_UNITS || (hold && v[12] !== null)) {
    const decoded = decodeInputUnits(v[12]);
    if (!decoded || !isMicros(v[13])) return null;
    units = decoded;
    unitsCostMicros = BigInt(v[13]);
  } else if (hold && v[13] !== '0') return null;
  const ok =
    (v.length === ADMITTED_FIELDS || units !== undefined || hold !== undefined) &&
    isText(v[1]) &&
    isText(v[2]) &&
    isTextOrNull(v[3]) &&
    isTextOrNull(v[4]) &&
    isText(v[5]) &&
    isText(v[6]) &&
    isText(v[7]) &&
    typeof v[8] === 'boolean' &&
    isCount(v[9]) &&
    isText(v[10]) &&
    /^-?\d+$/.test(v[10]) &&
    isCount(v[11]);
  if (!ok) return null;
  const [, id, organizationId, projectId, keyId, endpoint, model, priceVersion, streamed, inputTokens, cost, createdAt] = v as [
    string,
    string,
    string,
    string | null,
    string | null,
    string,
    string,
    string,
    boolean,
    number,
    string,
    number,
  ];
  const context: CallContext = { organizationId, projectId, keyId, endpoint, model, priceVersion, streamed, ...hold };
  return provisionalRow({ id, context, inputTokens, units, costMicros: BigInt(cost), unitsCostMicros, createdAt: new Date(createdAt) });
}

/** The record on a line, or null when the line is not a whole record (a torn write). */
export function decodeRecord(line: string): { kind: RecordKind; row: RequestLogRow } | null {
  let v: unknown;
  try {
    v = JSON.parse(line);
  } catch {
    return null;
  }
  if (!Array.isArray(v)) return null;
  if (v[0] === 'admitted') {
    const row = decodeAdmitted(v);
    return row && { kind: 'started', row };
  }
  if ((v.length !== FIELDS && v.length !== FIELDS_WITH_HOLD && v.length !== FIELDS_BEFORE_UNITS) || (v[0] !== 'row' && v[0] !== 'started')) return null;
  const withUnits = v.length !== FIELDS_BEFORE_UNITS;
  const withHold = v.length === FIELDS_WITH_HOLD;
  const bodies = v[v.length - 1];
  const ok =
    isText(v[1]) &&
    isText(v[2]) &&
    isTextOrNull(v[3]) &&
    isTextOrNull(v[4]) &&
    isText(v[5]) &&
    isTextOrNull(v[6]) &&
    isTextOrNull(v[7]) &&
    isTextOrNull(v[8]) &&
    isCount(v[9]) &&
    isTextOrNull(v[10]) &&
    [11, 12, 13, 14, 15].every((i) => isCount(v[i])) &&
    typeof v[16] === 'boolean' &&
    isText(v[17]) &&
    /^-?\d+$/.test(v[17]) &&
    isTextOrNull(v[18]) &&
    isCount(v[19]) &&
    (v[20] === null || isCount(v[20])) &&
    typeof v[21] === 'boolean' &&
    isCount(v[22]) &&
    isCount(v[23]) &&
    (!withUnits || unitColumnsAreValid(v)) &&
    (!withHold || (isTextOrNull(v[31]) && isTextOrNull(v[32]))) &&
    (bodies === null || typeof bodies === 'object');
  if (!ok) return null;
  return {
    kind: v[0],
    row: {
      id: v[1],
      organizationId: v[2],
      projectId: v[3],
      keyId: v[4],
      endpoint: v[5],
      model: v[6],
      provider: v[7],
      upstreamModel: v[8],
      statusCode: v[9],
      errorCode: v[10] === null ? null : (requestLogErrorCode(v[10]) ?? 'internal_error'),
      inputTokens: v[11],
      cachedInputTokens: v[12],
      cacheWriteTokens: v[13],
      outputTokens: v[14],
      reasoningTokens: v[15],
      usageEstimated: v[16],
      costMicros: BigInt(v[17]),
      priceVersion: v[18],
      latencyMs: v[19],
      ttftMs: v[20],
      streamed: v[21],
      attempts: v[22],
      createdAt: new Date(v[23]),
      ...(withUnits ? unitFields(v) : {}),
      ...(withHold ? batchLineFields(v[31] as string | null, v[32] as string | null) : {}),
      bodies: bodies as RequestLogRow['bodies'],
    },
  };
}

/** A batch line's hold and batch, only those it has. */
function batchLineFields(holdId: string | null, batchId: string | null): Pick<RequestLogRow, 'holdId' | 'batchId'> {
  const fields: Pick<RequestLogRow, 'holdId' | 'batchId'> = {};
  if (holdId !== null) fields.holdId = holdId;
  if (batchId !== null) fields.batchId = batchId;
  return fields;
}

/** A row record's units and their cost, only those it has: a row without units reads back as it was written. */
function unitFields(v: unknown[]): Pick<RequestLogRow, 'units' | 'unitsCostMicros'> {
  const fields: Pick<RequestLogRow, 'units' | 'unitsCostMicros'> = {};
  const units = unitsFromColumns(v[24], v[25], v[26], v[27], v[28], v[29]);
  if (units) fields.units = units;
  const cost = BigInt(v[30] as string);
  if (cost !== 0n) fields.unitsCostMicros = cost;
  return fields;
}

/** The unit columns of a row record (positions 24 to 30: rowValues' order after created_at). */
function unitColumnsAreValid(v: unknown[]): boolean {
  return isCount(v[24]) && isCount(v[25]) && isTextOrNull(v[26]) && isTextOrNull(v[27]) && isCount(v[28]) && isCount(v[29]) && isMicros(v[30]);
}

/**
 * The calls in a set of segment texts: a final row wins over a provisional (started) one for the
 * same request id, whatever the order of the files and of the lines in them. A line that is not a whole record is counted
 * and skipped: the last line of a segment is torn when the process died inside its write.
 */
export function readCalls(texts: readonly string[]): { rows: RequestLogRow[]; unreadableLines: number } {
  const calls = new Map<string, { kind: RecordKind; row: RequestLogRow }>();
  let unreadableLines = 0;
  for (const text of texts) {
    for (const line of text.split('\n')) {
      if (line === '') continue;
      const record = decodeRecord(line);
      if (!record) {
        unreadableLines += 1;
        continue;
      }
      const known = calls.get(record.row.id);
      if (!known || (known.kind === 'started' && record.kind === 'row')) calls.set(record.row.id, record);
    }
  }
  return { rows: [...calls.values()].map((call) => call.row), unreadableLines };
}

// ---- Owners -----------------------------------------------------------------------------------

/** Who wrote a segment, as its owner record says. */
export interface OwnerRecord {
  instance: string;
  host: string;
  /** The kernel's boot id: a different one on the same host means the machine restarted since. */
  bootId: string | null;
  /** The pid namespace: pids can only be compared within one (a container has its own). */
  pidNamespace: string | null;
  pid: number;
  /** The process's start time in clock ticks since boot: tells a reused pid apart. */
  startTicks: string | null;
}

export interface HostView {
  /** This process. */
  self: OwnerRecord;
  /** The start time of a running pid in this namespace ('' when running but unknown), null when none runs. */
  startTicksOf(pid: number): string | null;
  now(): number;
}

/**
 * Whether the process that owns a segment is gone, so its segments may be replayed:
 * - no readable owner record: gone (it is written before the first segment and removed after the last);
 * - same host, another boot: gone (the machine restarted);
 * - same host, boot and pid namespace: gone if its pid is ours (one pid is one process at a time, so
 *   it was an earlier incarnation: a container's every incarnation is often PID 1), if no process
 *   has that pid, or if the one that does started at another time (the pid was reused); else alive;
 * - otherwise (another host sharing the folder, or another container): its pid cannot be probed, so
 *   it is gone when its heartbeat is older than `staleAfterMs`. Taking over a live process's segment
 *   this way never bills twice (replay is idempotent); see README.
 */
export function ownerIsGone(owner: OwnerRecord | null, heartbeatAt: number | null, here: HostView, staleAfterMs = STALE_AFTER_MS): boolean {
  if (!owner) return true;
  const self = here.self;
  if (owner.host === self.host && owner.bootId !== null && self.bootId !== null && owner.bootId !== self.bootId) return true;
  if (owner.host === self.host && owner.bootId === self.bootId && owner.pidNamespace === self.pidNamespace) {
    if (owner.pid === self.pid) return true;
    const ticks = here.startTicksOf(owner.pid);
    if (ticks === null) return true;
    return ticks !== '' && owner.startTicks !== null && ticks !== owner.startTicks;
  }
  return heartbeatAt === null || here.now() - heartbeatAt > staleAfterMs;
}

function readOptional(path: string): string | null {
  try {
    return readFileSync(path, 'utf8').trim();
  } catch {
    return null;
  }
}

/** /proc/<pid>/stat's 22nd field; the command name (2nd) may hold spaces and parentheses. */
function procStartTicks(proc: string, pid: number | 'self'): string | null {
  const stat = readOptional(`${proc}/${pid}/stat`);
  if (stat === null) return null;
  return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19] ?? null;
}

/**
 * This machine as /proc shows it (on systems without /proc, pids are probed with signal 0). `proc`
 * is where the process table is mounted: another folder stands for a system without one.
 */
export function localHost(instance: string, proc = '/proc'): HostView {
  let pidNamespace: string | null;
  try {
    pidNamespace = readlinkSync(`${proc}/self/ns/pid`);
  } catch {
    pidNamespace = null;
  }
  const self: OwnerRecord = {
    instance,
    host: hostname(),
    bootId: readOptional(`${proc}/sys/kernel/random/boot_id`),
    pidNamespace,
    pid: process.pid,
    startTicks: procStartTicks(proc, 'self'),
  };
  return {
    self,
    now: Date.now,
    startTicksOf(pid) {
      if (self.startTicks !== null) return procStartTicks(proc, pid);
      try {
        process.kill(pid, 0);
        return '';
      } catch (error) {
        return (error as NodeJS.ErrnoException).code === 'EPERM' ? '' : null;
      }
    },
  };
}

// ---- The journal --------------------------------------------------------------------------------

interface Segment {
  path: string;
  /** Open while it is the one being written; null once closed (full, or a write failed). */
  fd: number | null;
  bytes: number;
  /** Rows written here that wait in the writer's queue for the database. */
  held: number;
  /** Provisional records here whose call has not written its final row yet. */
  open: number;
  /** Holds rows the writer did not keep in memory (its queue was full): kept for the next start. */
  kept: boolean;
}

function ignoreMissing(fn: () => void): void {
  try {
    fn();
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
  }
}

/**
 * The writer's side: admitted() when a call is admitted, append() when its row is queued, committed(n)
 * when the writer stored its n oldest queued rows. Rows are stored in the order they were appended
 * (the writer's queue is first in, first out), so counting per segment is enough to know when a
 * segment holds nothing the database lacks. Nothing here throws on the request path: a failed
 * write is counted and logged, and the call goes on unprotected.
 */
export class BillingJournal {
  private dir: string | null = null;
  private readonly host: HostView;
  private ownerFd: number | null = null;
  private segments: Segment[] = [];
  private sequence = 0;
  /** Calls with a provisional record and no final row yet, by request id. */
  private readonly startedIn = new Map<string, Segment>();
  private timers: NodeJS.Timeout[] = [];
  private recovering: Promise<RecoveryReport> | null = null;
  /** Writes that failed (disk full, I/O error): those calls were not protected. */
  failedWrites = 0;

  constructor(
    private readonly recorder: UsageRecorder,
    private readonly settings: JournalSettings,
    private readonly logger: FastifyBaseLogger,
    host?: HostView,
  ) {
    this.host = host ?? localHost(randomBytes(8).toString('hex'));
  }

  /** This process's instance id (the prefix of its files). */
  get id(): string {
    return this.host.self.instance;
  }

  /** Creates this process's owner record and first segment in the database's folder. */
  open(databaseId: string): void {
    const dir = join(this.settings.root, databaseId);
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    this.dir = dir;
    openHere.add(this.id);
    this.writeOwnerRecord();
    this.openSegment();
  }

  /** Heartbeat and the periodic look for other processes' orphaned segments. */
  startBackground(): void {
    const heartbeat = setInterval(() => this.beat(), HEARTBEAT_MS);
    const scan = setInterval(() => {
      this.recover().catch((error: unknown) => this.logger.error({ err: error }, 'billing journal: replaying segments of a gone process failed; will retry'));
    }, SCAN_MS);
    heartbeat.unref();
    scan.unref();
    this.timers.push(heartbeat, scan);
  }

  /** A settled call's row; `held` is false when the writer could not keep it in memory. */
  append(row: RequestLogRow, held: boolean): void {
    if (this.dir === null) return;
    const segment = this.writable();
    if (held) segment.held += 1;
    else segment.kept = true;
    const written = this.write(segment, encodeRecord('row', row));
    if (written && this.startedIn.size > 0) {
      const provisional = this.startedIn.get(row.id);
      if (provisional) {
        this.startedIn.delete(row.id);
        provisional.open -= 1;
      }
    }
  }

  /** A call is about to be sent upstream: what to bill if the process dies before its append(). */
  admitted(call: ProvisionalCall): void {
    if (this.dir === null) return;
    const segment = this.writable();
    if (this.write(segment, encodeAdmitted(call))) {
      segment.open += 1;
      this.startedIn.set(call.id, segment);
    }
  }

  /** The writer stored its `count` oldest queued rows. */
  committed(count: number): void {
    let left = count;
    for (const segment of this.segments) {
      if (left === 0) break;
      const take = Math.min(left, segment.held);
      segment.held -= take;
      left -= take;
    }
    this.collect();
  }

  /**
   * Replays the segments of gone processes (and any this process claimed earlier and could not
   * finish). One run at a time; a failed run leaves the claimed segments for the next.
   */
  recover(): Promise<RecoveryReport> {
    if (this.dir === null) return Promise.resolve({ segments: 0, calls: 0, inserted: 0, unreadableLines: 0 });
    this.recovering ??= this.recoverOnce(this.dir).finally(() => {
      this.recovering = null;
    });
    return this.recovering;
  }

  /**
   * After the writer drained: deletes every segment whose rows are all stored, and the owner record
   * with the last of them. Segments still holding rows stay for the next start to replay.
   */
  async close(): Promise<void> {
    for (const timer of this.timers) clearInterval(timer);
    this.timers = [];
    await this.recovering?.catch(() => undefined);
    const dir = this.dir;
    if (dir === null) return;
    this.dir = null;
    openHere.delete(this.id);
    const current = this.segments.at(-1);
    if (current) this.closeSegment(current);
    this.collect();
    if (this.ownerFd !== null) closeSync(this.ownerFd);
    this.ownerFd = null;
    if (this.segments.length > 0) {
      this.logger.warn({ segments: this.segments.map((s) => s.path) }, 'billing journal: rows not yet stored stay in the journal; the next start bills them');
      return;
    }
    ignoreMissing(() => unlinkSync(join(dir, `${this.id}${OWNER_SUFFIX}`)));
    try {
      rmdirSync(dir);
    } catch {
      // Other processes' files are still in it.
    }
  }

  /** The segment to write to: the current one, or a new one when it was closed (full, or broken). */
  private writable(): Segment {
    const last = this.segments.at(-1);
    if (last && last.fd !== null) return last;
    try {
      return this.openSegment();
    } catch (error) {
      this.failed(error);
      // Count on the closed one: the order of rows, which committed() relies on, is kept.
      return last ?? this.unwritableSegment();
    }
  }

  /** Stands in for a segment that could not be opened, so the rows counted on it keep their order. */
  private unwritableSegment(): Segment {
    const segment: Segment = { path: '', fd: null, bytes: 0, held: 0, open: 0, kept: false };
    this.segments.push(segment);
    return segment;
  }

  private openSegment(): Segment {
    this.sequence += 1;
    const path = join(this.dir!, `${this.id}.${String(this.sequence).padStart(6, '0')}.seg`);
    const fd = openSync(path, 'ax', 0o600);
    const segment: Segment = { path, fd, bytes: 0, held: 0, open: 0, kept: false };
    this.segments.push(segment);
    return segment;
  }

  /** One record, whole or not at all usable: a short write is finished, a failed one closes the segment. */
  private write(segment: Segment, line: string): boolean {
    if (segment.fd === null) return false;
    try {
      const done = writeSync(segment.fd, line);
      const length = Buffer.byteLength(line);
      if (done < length) {
        const bytes = Buffer.from(line, 'utf8');
        for (let at = done; at < length; ) at += writeSync(segment.fd, bytes, at);
      }
      segment.bytes += length;
      if (segment.bytes >= this.settings.segmentBytes) this.closeSegment(segment);
      return true;
    } catch (error) {
      // Whatever part of the line got out is an unreadable line; nothing more goes after it.
      this.closeSegment(segment);
      this.failed(error);
      return false;
    }
  }

  private closeSegment(segment: Segment): void {
    if (segment.fd === null) return;
    try {
      closeSync(segment.fd);
    } finally {
      segment.fd = null;
    }
  }

  private failed(error: unknown): void {
    this.failedWrites += 1;
    if (this.failedWrites === 1 || this.failedWrites % 1000 === 0) {
      this.logger.error({ err: error, failedWrites: this.failedWrites }, 'billing journal: a write failed; calls are unprotected against a crash until it works again');
    }
  }

  /** Deletes closed segments with nothing left that the database lacks. */
  private collect(): void {
    const keep: Segment[] = [];
    for (const segment of this.segments) {
      if (segment.fd === null && segment.held === 0 && segment.open === 0 && !segment.kept) {
        if (segment.path !== '') this.deleteStored(segment.path);
      } else {
        keep.push(segment);
      }
    }
    this.segments = keep;
  }

  /**
   * A segment whose rows are all stored that cannot be deleted (a file system remounted read-only)
   * is left for the next start, whose replay bills nothing twice: committed() runs in the writer's
   * flush, after its transaction, and must not throw there.
   */
  private deleteStored(path: string): void {
    try {
      ignoreMissing(() => unlinkSync(path));
    } catch (error) {
      this.logger.warn({ err: error, segment: path }, 'billing journal: a segment whose rows are all stored could not be deleted; the next start replays it');
    }
  }

  /** Written aside and renamed: another process never reads a half-written owner record. */
  private writeOwnerRecord(): void {
    const path = join(this.dir!, `${this.id}${OWNER_SUFFIX}`);
    writeFileSync(`${path}.tmp`, JSON.stringify(this.host.self), { mode: 0o600 });
    renameSync(`${path}.tmp`, path);
    // Opened before the old one is closed: should the open fail (another replica removed the record
    // again), the field keeps a descriptor this journal owns, not the number of one it closed, which
    // the process may reuse for any file and a later heartbeat or close() would then touch or close.
    const fd = openSync(path, 'r');
    if (this.ownerFd !== null) closeSync(this.ownerFd);
    this.ownerFd = fd;
  }

  /**
   * Keeps the owner record fresh, and puts it back and starts a new segment if another process
   * judged this one gone (a stall past the heartbeat's limit, see ownerIsGone) and took them over.
   */
  private beat(): void {
    if (this.ownerFd === null || this.dir === null) return;
    try {
      statSync(join(this.dir, `${this.id}${OWNER_SUFFIX}`));
      const now = new Date();
      futimesSync(this.ownerFd, now, now);
    } catch {
      try {
        this.writeOwnerRecord();
      } catch (error) {
        this.failed(error);
      }
    }
    const current = this.segments.at(-1);
    if (current && current.fd !== null) {
      try {
        statSync(current.path);
      } catch {
        this.logger.warn({ segment: current.path }, 'billing journal: another process replayed this segment; starting a new one');
        this.closeSegment(current);
      }
    }
  }

  private async recoverOnce(dir: string): Promise<RecoveryReport> {
    const names = readdirSync(dir);
    const present = new Set(names);
    const claimed: string[] = [];
    // Left over from an earlier run of this process that failed to store them.
    for (const name of names) if (name.startsWith(`${this.id}${CLAIMED}`)) claimed.push(name);

    const byOwner = new Map<string, string[]>();
    for (const name of names) {
      const owner = name.split('.', 1)[0]!;
      if (openHere.has(owner) || !(SEGMENT.test(name) || name.includes(CLAIMED) || name.endsWith(OWNER_SUFFIX))) continue;
      const files = byOwner.get(owner) ?? [];
      if (!name.endsWith(OWNER_SUFFIX)) files.push(name);
      byOwner.set(owner, files);
    }
    for (const [owner, files] of byOwner) {
      const ownerPath = join(dir, `${owner}${OWNER_SUFFIX}`);
      if (!this.isGone(ownerPath, present.has(`${owner}${OWNER_SUFFIX}`))) continue;
      for (const name of files) {
        const mine = `${this.id}${CLAIMED}${name}`;
        try {
          renameSync(join(dir, name), join(dir, mine));
          claimed.push(mine);
        } catch (error) {
          // ENOENT: another replica claimed it first.
          if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
        }
      }
      ignoreMissing(() => unlinkSync(ownerPath));
    }
    if (claimed.length === 0) return { segments: 0, calls: 0, inserted: 0, unreadableLines: 0 };

    const { rows, unreadableLines } = readCalls(claimed.map((name) => readFileSync(join(dir, name), 'utf8')));
    let inserted = 0;
    for (let i = 0; i < rows.length; i += this.settings.batchSize) inserted += await this.recorder.record(rows.slice(i, i + this.settings.batchSize));
    for (const name of claimed) ignoreMissing(() => unlinkSync(join(dir, name)));
    const report: RecoveryReport = { segments: claimed.length, calls: rows.length, inserted, unreadableLines };
    const log = unreadableLines > 0 ? this.logger.warn.bind(this.logger) : this.logger.info.bind(this.logger);
    log(report, `billing journal: replayed the segments of a gone process${unreadableLines > 0 ? ' (unreadable lines, torn by the crash, were skipped)' : ''}`);
    return report;
  }

  private isGone(ownerPath: string, exists: boolean): boolean {
    if (!exists) return ownerIsGone(null, null, this.host);
    let owner: OwnerRecord | null = null;
    let heartbeatAt: number | null = null;
    try {
      heartbeatAt = statSync(ownerPath).mtimeMs;
      owner = JSON.parse(readFileSync(ownerPath, 'utf8')) as OwnerRecord;
    } catch {
      // Vanished meanwhile (its owner closed cleanly, or another replica took it) or unreadable.
      if (heartbeatAt === null) return false;
    }
    return ownerIsGone(owner, heartbeatAt, this.host);
  }
}
