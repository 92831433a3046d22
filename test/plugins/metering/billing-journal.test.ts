import t, { type Test } from 'tap';
import Fastify, { type FastifyBaseLogger } from 'fastify';
import fs, {
  appendFileSync,
  closeSync,
  cpSync,
  existsSync,
  fstatSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  renameSync,
  rmSync,
  statSync,
  unlinkSync,
  utimesSync,
  writeFileSync,
} from 'node:fs';
import { syncBuiltinESMExports } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { mock } from 'node:test';
import { coreMigrations } from '../../../adapters/sql/core-migrations.ts';
import { SqlCreditLedger } from '../../../plugins/metering/credit-ledger-store.ts';
import { sqlIdentityStores } from '../../../adapters/sql/identity-stores.ts';
import { runMigrations } from '../../../adapters/sql/migrator.ts';
import { SqlUsageRecorder } from '../../../plugins/metering/usage-recorder.ts';
import { createOrganizationWithOwner } from '../../../core/identity/identity-admin.ts';
import {
  BillingJournal,
  decodeRecord,
  encodeAdmitted,
  encodeRecord,
  localHost,
  ownerIsGone,
  provisionalRow,
  readCalls,
  type HostView,
  type OwnerRecord,
  type ProvisionalCall,
} from '../../../plugins/metering/billing-journal.ts';
import { RequestLogWriter } from '../../../plugins/metering/request-log-writer.ts';
import { requestLogRow } from '../../helpers/request-log-rows.ts';
import type { RequestLogRow, UsageRecorder } from '../../../core/ports/metering.ts';
import { meteringMigrations } from '../../../plugins/metering/metering-migrations.ts';
import { databaseBackends } from '../../helpers/databases.ts';

const silent = Fastify({ logger: false }).log;
const DATABASE = 'db1';

/** Journals here never reach a database unless a test gives them one. */
const unusedRecorder: UsageRecorder = {
  record: () => Promise.reject(new Error('this test stores nothing')),
};

/** A row at a fixed instant, so a record read back compares equal. */
const row = (overrides: Partial<RequestLogRow> = {}): RequestLogRow => requestLogRow({ createdAt: new Date(1_700_000_000_123), ...overrides });

/** The call of `r` as admission journals it before sending it upstream: its input, costing `costMicros`. */
const provisionalOf = (r: RequestLogRow, costMicros = 10n): ProvisionalCall => ({
  id: r.id,
  context: { organizationId: r.organizationId, projectId: r.projectId, keyId: r.keyId, endpoint: r.endpoint, model: r.model!, priceVersion: r.priceVersion!, streamed: r.streamed },
  inputTokens: r.inputTokens,
  costMicros,
  createdAt: r.createdAt,
});

function tempRoot(t: Test): string {
  const root = mkdtempSync(join(tmpdir(), 'svc-journal-'));
  t.teardown(() => rmSync(root, { recursive: true, force: true }));
  return root;
}

function journal(root: string, options: { recorder?: UsageRecorder; segmentBytes?: number; host?: HostView; logger?: FastifyBaseLogger } = {}): BillingJournal {
  const settings = { root, segmentBytes: options.segmentBytes ?? 1 << 20, batchSize: 2 };
  return new BillingJournal(options.recorder ?? unusedRecorder, settings, options.logger ?? silent, options.host);
}

/** A recorder that keeps each batch it is given; `failNext()` makes its next call fail. */
function memoryRecorder() {
  const batches: RequestLogRow[][] = [];
  let failures = 0;
  const recorder: UsageRecorder = {
    record: async (rows) => {
      if (failures > 0) {
        failures -= 1;
        throw new Error('database down');
      }
      batches.push([...rows]);
      return rows.length;
    },
  };
  return { recorder, batches, ids: () => batches.flat().map((r) => r.id), failNext: () => void (failures += 1) };
}

const INFO = 30;
const WARN = 40;
const ERROR = 50;

/** A logger whose lines are kept, parsed; `next(level)` resolves with the next line at that level. */
function capturingLogger() {
  const lines: Array<Record<string, unknown>> = [];
  const waiting: Array<{ level: number; resolve: (line: Record<string, unknown>) => void }> = [];
  const write = (text: string) => {
    const line = JSON.parse(text) as Record<string, unknown>;
    lines.push(line);
    const waiter = waiting.findIndex((w) => w.level === line.level);
    if (waiter >= 0) waiting.splice(waiter, 1)[0]!.resolve(line);
  };
  const log = Fastify({ logger: { level: 'info', stream: { write } } }).log;
  return {
    log,
    lines,
    at: (level: number) => lines.filter((line) => line.level === level),
    next: (level: number) => new Promise<Record<string, unknown>>((resolve) => waiting.push({ level, resolve })),
  };
}

/** The heartbeat and the scan run on mocked intervals: `tick(ms)` runs what falls due, at once. */
function mockedIntervals(t: Test) {
  mock.timers.enable({ apis: ['setInterval'] });
  t.teardown(() => mock.timers.reset());
  return mock.timers;
}

/**
 * Runs `work` with one of node:fs's functions replaced, as a failing or slow disk would behave; the
 * journal's own import of it is replaced too (syncBuiltinESMExports).
 */
async function withFs<K extends 'writeSync' | 'openSync' | 'unlinkSync' | 'renameSync'>(name: K, fake: (typeof fs)[K], work: () => unknown): Promise<void> {
  const real = fs[name];
  Object.assign(fs, { [name]: fake });
  syncBuiltinESMExports();
  try {
    await work();
  } finally {
    Object.assign(fs, { [name]: real });
    syncBuiltinESMExports();
  }
}

const failing = (code: string) => () => {
  throw Object.assign(new Error(`${code}: the disk refused`), { code });
};
const noSpace = failing('ENOSPC') as typeof fs.writeSync;

/** Descriptors this process holds open on files under `root`, as /proc lists them. */
function descriptorsUnder(root: string): number {
  let count = 0;
  for (const fd of readdirSync('/proc/self/fd')) {
    try {
      if (readlinkSync(`/proc/self/fd/${fd}`).startsWith(root)) count += 1;
    } catch {
      // The listing's own descriptor, closed by now.
    }
  }
  return count;
}
function isOpen(fd: number): boolean {
  try {
    fstatSync(fd);
    return true;
  } catch {
    return false;
  }
}
const withoutProc = existsSync('/proc/self/fd') ? false : 'no /proc on this system';

/** A process that journaled with `fill` and died: its files stay as a killed process leaves them. */
async function leaveBehind(root: string, fill: (j: BillingJournal) => void): Promise<BillingJournal> {
  const j = journal(root);
  j.open(DATABASE);
  fill(j);
  await j.close();
  return j;
}

const files = (root: string) => readdirSync(join(root, DATABASE)).sort();
const segments = (root: string) => files(root).filter((name) => name.endsWith('.seg'));

/** This process as another one would see it: the parent's pid, so it counts as a live process. */
function liveElsewhere(): HostView {
  const here = localHost('0123456789abcdef');
  const parentTicks = here.startTicksOf(process.ppid);
  return { ...here, self: { ...here.self, pid: process.ppid, startTicks: parentTicks === '' ? null : parentTicks } };
}

t.test('records', async (t) => {
  t.test('a row survives the round trip through a line exactly, money and bodies included', async (t) => {
    const original = row({ costMicros: 9_007_199_254_740_993n, bodies: { request: { messages: [] }, response: { text: 'hi' } }, ttftMs: 12 });
    const line = encodeRecord('row', original);
    t.ok(line.endsWith('\n'));
    // Strictly: a row without units reads back without units fields, not with empty ones.
    t.strictSame(decodeRecord(line.trimEnd()), { kind: 'row', row: original });
  });

  t.test('a provisional call survives the round trip as the row it is billed as: its input alone, interrupted', async (t) => {
    const call = provisionalOf(row({ inputTokens: 37, streamed: true }), 9_007_199_254_740_993n);
    t.same(decodeRecord(encodeAdmitted(call).trimEnd()), {
      kind: 'started',
      row: {
        ...row({ id: call.id, inputTokens: 37, streamed: true }),
        provider: null,
        upstreamModel: null,
        statusCode: 500,
        errorCode: 'gateway_interrupted',
        outputTokens: 0,
        usageEstimated: true,
        costMicros: 9_007_199_254_740_993n,
        latencyMs: 0,
        ttftMs: null,
        attempts: 0,
        cachedInputTokens: 0,
        cacheWriteTokens: 0,
        reasoningTokens: 0,
        bodies: null,
      },
    });
  });

  t.test('a provisional row written whole (by a journal from before admission records) is still read as one', async (t) => {
    const provisional = row({ statusCode: 500, errorCode: 'gateway_interrupted' });
    t.same(decodeRecord(encodeRecord('started', provisional).trimEnd()), { kind: 'started', row: provisional });
  });

  t.test('a row with units survives the round trip: searches, images by size and quality, characters, seconds, their cost', async (t) => {
    const units = { webSearches: 2, images: { count: 3, size: '1024x1024', quality: 'hd' }, characters: 40, audioSeconds: 7 };
    const original = row({ units, costMicros: 250_001n, unitsCostMicros: 250_000n });
    t.same(decodeRecord(encodeRecord('row', original).trimEnd()), { kind: 'row', row: original });
  });

  t.test('a provisional call keeps its input units and their cost: what a crash bills besides its input tokens', async (t) => {
    const call = { ...provisionalOf(row({ inputTokens: 3 }), 15_003n), units: { characters: 1000 }, unitsCostMicros: 15_000n };
    t.match(decodeRecord(encodeAdmitted(call).trimEnd()), {
      kind: 'started',
      row: { inputTokens: 3, units: { characters: 1000 }, costMicros: 15_003n, unitsCostMicros: 15_000n, errorCode: 'gateway_interrupted' },
    });
  });

  t.test('records written before units were metered are still read, as calls with no units', async (t) => {
    // A row line and an admitted line exactly as the journal wrote them then (23 columns; 12 fields).
    const oldRow =
      '["row","req_old","00000000-0000-4000-8000-000000000001",null,null,"/v1/chat/completions","m","p","up",200,null,' + '10,0,0,5,0,false,"20",null,12,null,false,1,1700000000123,null]';
    const oldAdmitted = '["admitted","req_adm","00000000-0000-4000-8000-000000000001",null,null,"/v1/chat/completions","m","pv",false,10,"10",1700000000123]';
    const decoded = decodeRecord(oldRow);
    t.match(decoded, { kind: 'row', row: { id: 'req_old', inputTokens: 10, outputTokens: 5, costMicros: 20n, bodies: null } });
    t.equal(decoded?.row.units, undefined);
    t.match(decodeRecord(oldAdmitted), { kind: 'started', row: { id: 'req_adm', inputTokens: 10, costMicros: 10n } });
    t.equal(decodeRecord(oldAdmitted)?.row.units, undefined);
  });

  t.test('a line cut short is not a record', async (t) => {
    const line = encodeRecord('row', row());
    t.equal(decodeRecord(line.slice(0, 40)), null);
    t.equal(decodeRecord('[1,2,3]'), null);
  });

  // Wrong values per kind of field: each is what a torn or garbled line could hold there.
  const TEXT = [7, null];
  const TEXT_OR_NULL = [7, false];
  const COUNT = [1.5, '3', null];
  const FLAG = ['true', 0, null];
  const MICROS = [20, '2x', 'x2', '2.5', null];

  t.test('a record with any field of the wrong type is a torn line, not a record', async (t) => {
    const units = { webSearches: 1, images: { count: 1, size: '1024x1024', quality: 'hd' }, characters: 3, audioSeconds: 2 };
    const valid = JSON.parse(encodeRecord('row', row({ units, unitsCostMicros: 5n, bodies: { request: {}, response: {} } }))) as unknown[];
    t.ok(decodeRecord(JSON.stringify(valid)), 'the record every case below alters is whole');
    const fields: Array<[string, unknown[]]> = [
      ['kind', ['rowx', 'admitted', null]],
      ['id', TEXT],
      ['organization', TEXT],
      ['project', TEXT_OR_NULL],
      ['key', TEXT_OR_NULL],
      ['endpoint', TEXT],
      ['model', TEXT_OR_NULL],
      ['provider', TEXT_OR_NULL],
      ['upstream model', TEXT_OR_NULL],
      ['status code', COUNT],
      ['error code', TEXT_OR_NULL],
      ['input tokens', COUNT],
      ['cached input tokens', COUNT],
      ['cache write tokens', COUNT],
      ['output tokens', COUNT],
      ['reasoning tokens', COUNT],
      ['usage estimated', FLAG],
      ['cost', MICROS],
      ['price version', TEXT_OR_NULL],
      ['latency', COUNT],
      ['time to first token', [1.5, '3', false]],
      ['streamed', FLAG],
      ['attempts', COUNT],
      ['created at', COUNT],
      ['web searches', COUNT],
      ['images', COUNT],
      ['image size', TEXT_OR_NULL],
      ['image quality', TEXT_OR_NULL],
      ['characters', COUNT],
      ['audio seconds', COUNT],
      ['units cost', MICROS],
      ['bodies', ['text', 5, true]],
    ];
    t.equal(fields.length, valid.length, 'every position is covered');
    fields.forEach(([name, wrongs], position) => {
      for (const wrong of wrongs) {
        const line = JSON.stringify(valid.with(position, wrong));
        t.equal(decodeRecord(line), null, `${name} (position ${position}) = ${JSON.stringify(wrong)}`);
      }
    });
  });

  t.test('a provisional record with any field of the wrong type is a torn line, not a record', async (t) => {
    const call = { ...provisionalOf(row()), units: { characters: 4, audioSeconds: 1 }, unitsCostMicros: 3n };
    const withUnits = JSON.parse(encodeAdmitted(call)) as unknown[];
    const withoutUnits = JSON.parse(encodeAdmitted(provisionalOf(row()))) as unknown[];
    t.ok(decodeRecord(JSON.stringify(withUnits)) && decodeRecord(JSON.stringify(withoutUnits)), 'the records altered below are whole');
    const fields: Array<[string, unknown[]]> = [
      ['kind', ['admittedx', null]],
      ['id', TEXT],
      ['organization', TEXT],
      ['project', TEXT_OR_NULL],
      ['key', TEXT_OR_NULL],
      ['endpoint', TEXT],
      ['model', TEXT],
      ['price version', TEXT],
      ['streamed', FLAG],
      ['input tokens', COUNT],
      ['cost', MICROS],
      ['created at', COUNT],
      ['input units', [null, [], 5, 'x', { characters: -1 }, { characters: 1.5 }, { characters: '3' }, { audioSeconds: -1 }, { characters: 1, images: 2 }]],
      ['units cost', MICROS],
    ];
    t.equal(fields.length, withUnits.length, 'every position is covered');
    fields.forEach(([name, wrongs], position) => {
      for (const wrong of wrongs) {
        t.equal(decodeRecord(JSON.stringify(withUnits.with(position, wrong))), null, `${name} (position ${position}) = ${JSON.stringify(wrong)}`);
        if (position < withoutUnits.length) {
          t.equal(decodeRecord(JSON.stringify(withoutUnits.with(position, wrong))), null, `without units: ${name} = ${JSON.stringify(wrong)}`);
        }
      }
    });
  });

  t.test('a line of another length, or one that is not a JSON array, is not a record', async (t) => {
    const rowValues = JSON.parse(encodeRecord('row', row())) as unknown[];
    const admitted = JSON.parse(encodeAdmitted({ ...provisionalOf(row()), units: { characters: 4 }, unitsCostMicros: 3n })) as unknown[];
    const cases: Array<[string, unknown]> = [
      ['a row with one field more', [...rowValues, null]],
      ['a row of neither length', [...rowValues.slice(0, 24), null, null]],
      ['a provisional record one field short', admitted.slice(0, 11)],
      ['a provisional record with units but not their cost', admitted.slice(0, 13)],
      ['a provisional record with one field more', [...admitted, '0']],
      ['null', null],
      ['a number', 5],
      ['a string', 'row'],
      ['an object', { 0: 'row', length: rowValues.length }],
    ];
    for (const [name, value] of cases) t.equal(decodeRecord(JSON.stringify(value)), null, name);
    t.equal(decodeRecord('not json'), null, 'not JSON');
  });

  t.test('a provisional call of zero characters and zero seconds is read back with them', async (t) => {
    const call = { ...provisionalOf(row()), units: { characters: 0, audioSeconds: 0 }, unitsCostMicros: 0n };
    t.match(decodeRecord(encodeAdmitted(call).trimEnd()), { kind: 'started', row: { units: { characters: 0, audioSeconds: 0 } } });
  });

  t.test('a row whose error code nobody catalogues any more is read as internal_error', async (t) => {
    const values = JSON.parse(encodeRecord('row', row({ statusCode: 502, errorCode: 'upstream_error' }))) as unknown[];
    t.match(decodeRecord(JSON.stringify(values.with(10, 'code_since_removed'))), { row: { statusCode: 502, errorCode: 'internal_error' } });
  });
});

t.test('writing', async (t) => {
  t.test('a row is on disk, whole, when append returns, in a file only this user can read', async (t) => {
    const root = tempRoot(t);
    const j = journal(root);
    j.open(DATABASE);
    const r = row();
    j.append(r, true);
    const [segment] = segments(root);
    const text = readFileSync(join(root, DATABASE, segment!), 'utf8');
    t.same(decodeRecord(text.trimEnd()), { kind: 'row', row: r });
    t.equal(statSync(join(root, DATABASE, segment!)).mode & 0o777, 0o600);
    t.equal(statSync(join(root, DATABASE, `${j.id}.owner`)).mode & 0o777, 0o600, 'the owner record too');
    t.equal(statSync(join(root, DATABASE)).mode & 0o777, 0o700);
  });

  t.test('a segment is closed once it holds segmentBytes bytes: the next record begins a new one', async (t) => {
    const root = tempRoot(t);
    const first = row();
    const j = journal(root, { segmentBytes: Buffer.byteLength(encodeRecord('row', first)) });
    j.open(DATABASE);
    j.append(first, true);
    j.append(row(), true);
    t.equal(segments(root).length, 2);
  });

  t.test('the segment being written stays while it is open, even once every row in it is stored', async (t) => {
    const root = tempRoot(t);
    const j = journal(root);
    j.open(DATABASE);
    const stored = row();
    j.append(stored, true);
    j.committed(1);
    const next = row();
    j.append(next, true);
    t.equal(segments(root).length, 1);
    const text = readFileSync(join(root, DATABASE, segments(root)[0]!), 'utf8');
    t.match(text, next.id, 'the row written after is on disk');
    t.match(text, stored.id, 'in the same segment');
    if (!withoutProc) t.equal(descriptorsUnder(root), 2, 'the owner record’s and that segment’s descriptors, no more');
  });

  t.test('a segment is closed past its size and deleted once every row in it is stored', async (t) => {
    const root = tempRoot(t);
    const j = journal(root, { segmentBytes: 1 });
    j.open(DATABASE);
    for (let i = 0; i < 3; i += 1) j.append(row(), true);
    t.equal(segments(root).length, 3, 'one row per segment at this size');
    j.committed(2);
    t.equal(segments(root).length, 1, 'the two oldest segments held only stored rows');
    j.committed(1);
    t.same(segments(root), []);
    j.append(row(), true);
    t.equal(segments(root).length, 1, 'the next row begins a new segment');
  });

  t.test('a provisional record keeps its segment until the call writes its own row', async (t) => {
    const root = tempRoot(t);
    const j = journal(root, { segmentBytes: 1 });
    j.open(DATABASE);
    const call = row({ streamed: true });
    j.admitted(provisionalOf(call));
    j.append(row(), true);
    j.committed(1);
    t.equal(segments(root).length, 1, 'the provisional record is all that is left, and it is kept');
    j.append(call, true);
    j.committed(1);
    t.same(segments(root), [], 'the call’s own row replaced it and is stored');
  });

  t.test('a row the writer could not hold in memory stays for the next start, with the owner record', async (t) => {
    const root = tempRoot(t);
    const j = journal(root, { segmentBytes: 1 });
    j.open(DATABASE);
    const overflow = row();
    j.append(overflow, false);
    j.append(row(), true);
    j.committed(1);
    await j.close();
    t.equal(segments(root).length, 1);
    t.match(readFileSync(join(root, DATABASE, segments(root)[0]!), 'utf8'), overflow.id, 'the one left holds that row');
    t.equal(files(root).filter((name) => name.endsWith('.owner')).length, 1);
  });

  t.test('a clean close with every row stored leaves nothing behind', async (t) => {
    const root = tempRoot(t);
    const j = journal(root);
    j.open(DATABASE);
    j.append(row(), true);
    j.committed(1);
    await j.close();
    t.same(readdirSync(root), []);
  });

  t.test('a clean close after its last segment was already deleted leaves nothing behind', async (t) => {
    const root = tempRoot(t);
    const j = journal(root, { segmentBytes: 1 });
    j.open(DATABASE);
    j.append(row(), true);
    j.committed(1);
    t.same(segments(root), []);
    await j.close();
    t.same(readdirSync(root), []);
  });

  t.test('a close that leaves rows behind names the segments it left', async (t) => {
    const root = tempRoot(t);
    const logs = capturingLogger();
    const j = journal(root, { logger: logs.log });
    j.open(DATABASE);
    j.append(row(), true);
    const left = segments(root).map((name) => join(root, DATABASE, name));
    await j.close();
    t.match(logs.at(WARN), [{ segments: left, msg: /rows not yet stored stay in the journal/ }]);
  });

  t.test('a full segment releases its descriptor, and a closed journal holds none', { skip: withoutProc }, async (t) => {
    const root = tempRoot(t);
    const j = journal(root, { segmentBytes: 1 });
    j.open(DATABASE);
    for (let i = 0; i < 3; i += 1) j.append(row(), true);
    t.equal(descriptorsUnder(root), 1, 'the owner record’s alone');
    j.committed(3);
    await j.close();
    t.equal(descriptorsUnder(root), 0);
  });

  t.test('a journal whose open failed halfway still closes cleanly (a shutdown after a failed start)', async (t) => {
    const root = tempRoot(t);
    const j = journal(root);
    // Where the owner record is written aside, a folder: the write fails after the journal's folder was made.
    mkdirSync(join(root, DATABASE, `${j.id}.owner.tmp`), { recursive: true });
    t.throws(() => j.open(DATABASE), { code: 'EISDIR' });
    await t.resolves(j.close());
  });

  t.test('a journal not open writes nothing, replays nothing and throws nothing; closing twice is harmless', async (t) => {
    const root = tempRoot(t);
    const j = journal(root);
    j.append(row(), true);
    j.admitted(provisionalOf(row()));
    j.committed(1);
    t.strictSame(await j.recover(), { segments: 0, calls: 0, inserted: 0, unreadableLines: 0 });
    t.same(readdirSync(root), []);
    j.open(DATABASE);
    j.append(row(), true);
    j.committed(1);
    await j.close();
    await j.close();
    j.append(row(), true);
    j.admitted(provisionalOf(row()));
    t.same(readdirSync(root), []);
    t.equal(j.failedWrites, 0);
  });

  t.test('the request-log writer journals each row as it is queued and releases it once flushed', async (t) => {
    const root = tempRoot(t);
    const stored: string[] = [];
    const recorder: UsageRecorder = {
      record: async (rows) => {
        stored.push(...rows.map((r) => r.id));
        return rows.length;
      },
    };
    const j = journal(root, { segmentBytes: 1 });
    j.open(DATABASE);
    const writer = new RequestLogWriter(recorder, { flushIntervalMs: 60_000, batchSize: 10, maxQueue: 100 }, silent, j);
    const queued = row();
    writer.enqueue(queued);
    t.match(readFileSync(join(root, DATABASE, segments(root)[0]!), 'utf8'), queued.id);
    await writer.flush();
    t.same(stored, [queued.id]);
    t.same(segments(root), []);
  });

  t.test('a row past the writer’s maxQueue is kept in the journal instead of being lost', async (t) => {
    const root = tempRoot(t);
    const recorder: UsageRecorder = { record: () => Promise.reject(new Error('database down')) };
    const j = journal(root);
    j.open(DATABASE);
    const writer = new RequestLogWriter(recorder, { flushIntervalMs: 60_000, batchSize: 1000, maxQueue: 1 }, silent, j);
    const held = row();
    const overflow = row();
    writer.enqueue(held);
    writer.enqueue(overflow);
    t.equal(writer.snapshot().dropped, 1, 'not held in memory');
    await j.close();
    const text = readFileSync(join(root, DATABASE, segments(root)[0]!), 'utf8');
    t.same(
      text
        .trimEnd()
        .split('\n')
        .map((line) => decodeRecord(line)?.row.id),
      [held.id, overflow.id],
      'both wait in the journal for the next start',
    );
  });
});

t.test('a failing disk', async (t) => {
  t.test('while no segment can be opened, calls go on unprotected, each counted once as a failed write', async (t) => {
    const root = tempRoot(t);
    const j = journal(root, { segmentBytes: 1 });
    j.open(DATABASE);
    j.append(row(), true);
    j.committed(1);
    rmSync(join(root, DATABASE), { recursive: true });
    j.append(row(), true);
    j.admitted(provisionalOf(row()));
    j.append(row(), true);
    t.equal(j.failedWrites, 3);

    mkdirSync(join(root, DATABASE));
    j.append(row(), true);
    t.equal(segments(root).length, 1, 'once the folder is back, records are written again');
    j.committed(3);
    await j.close();
    t.same(readdirSync(root), [], 'and a clean close leaves nothing behind: nothing was held for the unwritten records');
  });

  t.test('a failing journal logs its first failed write and every thousandth after, with the count', async (t) => {
    const root = tempRoot(t);
    const logs = capturingLogger();
    const j = journal(root, { segmentBytes: 1, logger: logs.log });
    j.open(DATABASE);
    j.append(row(), true);
    j.committed(1);
    rmSync(join(root, DATABASE), { recursive: true });
    const call = provisionalOf(row());
    for (let i = 0; i < 1000; i += 1) j.admitted(call);
    t.equal(j.failedWrites, 1000);
    t.match(logs.at(ERROR), [
      { failedWrites: 1, err: { message: /ENOENT/ }, msg: /a write failed; calls are unprotected/ },
      { failedWrites: 1000, err: { message: /ENOENT/ }, msg: /a write failed; calls are unprotected/ },
    ]);
    t.equal(logs.at(ERROR).length, 2);
  });

  t.test('a final row the disk refused leaves the call’s provisional record on disk, and the next record a new segment', async (t) => {
    const root = tempRoot(t);
    const j = journal(root);
    j.open(DATABASE);
    const call = row();
    j.admitted(provisionalOf(call));
    await withFs('writeSync', noSpace, () => j.append(call, true));
    t.equal(j.failedWrites, 1);
    j.append(row(), true);
    t.equal(segments(root).length, 2, 'nothing more goes after a failed write');
    j.committed(2);
    await j.close();
    const left = segments(root);
    t.equal(left.length, 1, 'the first segment stays');
    t.match(readCalls([readFileSync(join(root, DATABASE, left[0]!), 'utf8')]).rows, [{ id: call.id, errorCode: 'gateway_interrupted' }], 'billing the call at the next start');
  });

  t.test('a stored segment that cannot be deleted stops nothing: it is logged and left for the next start', async (t) => {
    const root = tempRoot(t);
    const logs = capturingLogger();
    const j = journal(root, { segmentBytes: 1, logger: logs.log });
    j.open(DATABASE);
    j.append(row(), true);
    const [segment] = segments(root);
    // A file system remounted read-only after an I/O error. committed() runs in the writer's flush,
    // after its transaction: a throw there would abandon the flush.
    await withFs('unlinkSync', failing('EROFS') as typeof fs.unlinkSync, () => t.doesNotThrow(() => j.committed(1)));
    t.match(logs.at(WARN), [{ segment: join(root, DATABASE, segment!), err: { code: 'EROFS' }, msg: /could not be deleted/ }]);
    t.same(segments(root), [segment], 'replaying it again bills nothing twice');
    await j.close();
  });

  t.test('a record the disk takes a few bytes at a time is whole on disk', async (t) => {
    const root = tempRoot(t);
    const j = journal(root);
    j.open(DATABASE);
    const r = row({ model: 'modèle-ü', bodies: { request: { text: 'ça' }, response: null } });
    const real = fs.writeSync;
    const fewBytes = ((fd: number, data: string | NodeJS.ArrayBufferView, offset?: number | null) => {
      const bytes = typeof data === 'string' ? Buffer.from(data) : Buffer.from(data.buffer, data.byteOffset, data.byteLength);
      const at = typeof data === 'string' ? 0 : (offset ?? 0);
      return real(fd, bytes, at, Math.min(5, bytes.length - at));
    }) as typeof fs.writeSync;
    await withFs('writeSync', fewBytes, () => j.append(r, true));
    t.equal(j.failedWrites, 0);
    const text = readFileSync(join(root, DATABASE, segments(root)[0]!), 'utf8');
    t.equal(text, encodeRecord('row', r));
    t.strictSame(decodeRecord(text.trimEnd()), { kind: 'row', row: r });
  });
});

t.test('in the background', async (t) => {
  const ownerOf = (root: string, j: BillingJournal) => join(root, DATABASE, `${j.id}.owner`);

  t.test('a running journal refreshes its owner record’s time every second', async (t) => {
    const timers = mockedIntervals(t);
    const root = tempRoot(t);
    const j = journal(root);
    j.open(DATABASE);
    const longAgo = new Date('2020-01-01T00:00:00Z');
    utimesSync(ownerOf(root, j), longAgo, longAgo);
    j.startBackground();
    timers.tick(1000);
    t.ok(statSync(ownerOf(root, j)).mtimeMs > Date.now() - 60_000, 'the heartbeat is fresh');
    await j.close();
  });

  t.test('an owner record another process removed (it judged this one gone) is back at the next heartbeat, held by one descriptor', async (t) => {
    const timers = mockedIntervals(t);
    const root = tempRoot(t);
    const j = journal(root);
    j.open(DATABASE);
    j.startBackground();
    unlinkSync(ownerOf(root, j));
    timers.tick(1000);
    t.match(JSON.parse(readFileSync(ownerOf(root, j), 'utf8')), { instance: j.id, pid: process.pid });
    if (!withoutProc) t.equal(descriptorsUnder(root), 2, 'the new owner record’s and the segment’s');
    await j.close();
  });

  t.test('a heartbeat that cannot put the owner record back counts a failed write, and puts it back once it can', async (t) => {
    const timers = mockedIntervals(t);
    const root = tempRoot(t);
    const j = journal(root);
    j.open(DATABASE);
    j.startBackground();
    rmSync(join(root, DATABASE), { recursive: true });
    timers.tick(1000);
    t.equal(j.failedWrites, 1);
    mkdirSync(join(root, DATABASE));
    timers.tick(1000);
    t.ok(existsSync(ownerOf(root, j)));
    await j.close();
  });

  t.test('an owner record taken again while it is put back leaves every other descriptor alone', async (t) => {
    const timers = mockedIntervals(t);
    const root = tempRoot(t);
    const j = journal(root);
    j.open(DATABASE);
    j.startBackground();
    const owner = ownerOf(root, j);
    unlinkSync(owner);
    const realOpen = fs.openSync;
    // Another replica judges this process gone again and removes the record just as it is reopened.
    const takenOnReopen = ((path: fs.PathLike, flags?: fs.OpenMode, mode?: fs.Mode | null) => {
      if (String(path) === owner && flags === 'r') unlinkSync(owner);
      return realOpen(path, flags ?? 'r', mode);
    }) as typeof fs.openSync;
    await withFs('openSync', takenOnReopen, () => timers.tick(1000));
    // Files the process opens meanwhile take the lowest free descriptor numbers.
    const others = Array.from({ length: 16 }, (_, i) => openSync(join(root, `other-${i}`), 'w'));
    t.teardown(() => {
      for (const fd of others) if (isOpen(fd)) closeSync(fd);
    });
    timers.tick(1000);
    await j.close();
    t.same(
      others.filter((fd) => !isOpen(fd)),
      [],
      'none of the process’s other descriptors was closed',
    );
  });

  t.test('a segment another process took over is written no more: the next record begins a new one', async (t) => {
    const timers = mockedIntervals(t);
    const root = tempRoot(t);
    const logs = capturingLogger();
    const j = journal(root, { logger: logs.log });
    j.open(DATABASE);
    j.startBackground();
    j.append(row(), true);
    const [taken] = segments(root);
    const claimed = join(root, DATABASE, `ffffffffffffffff.claimed.${taken}`);
    renameSync(join(root, DATABASE, taken!), claimed);
    timers.tick(1000);
    t.match(logs.at(WARN), [{ segment: join(root, DATABASE, taken!), msg: /another process replayed this segment/ }]);
    const next = row();
    j.append(next, true);
    t.notMatch(readFileSync(claimed, 'utf8'), next.id);
    const [current] = segments(root).filter((name) => name.startsWith(j.id));
    t.match(readFileSync(join(root, DATABASE, current!), 'utf8'), next.id);
    await j.close();
  });

  t.test('a heartbeat with no segment open leaves the segments alone', async (t) => {
    const timers = mockedIntervals(t);
    const root = tempRoot(t);
    const j = journal(root, { segmentBytes: 1 });
    j.open(DATABASE);
    j.append(row(), true);
    j.committed(1);
    j.startBackground();
    timers.tick(1000);
    t.same(segments(root), []);
    t.equal(j.failedWrites, 0);
    await j.close();
  });

  t.test('a journal started before it is opened does nothing until it is', async (t) => {
    const timers = mockedIntervals(t);
    const root = tempRoot(t);
    const j = journal(root);
    j.startBackground();
    timers.tick(1000);
    t.equal(j.failedWrites, 0);
    t.same(readdirSync(root), []);
    j.open(DATABASE);
    unlinkSync(ownerOf(root, j));
    timers.tick(1000);
    t.ok(existsSync(ownerOf(root, j)), 'its heartbeat runs once it is');
    await j.close();
  });

  t.test('a running journal looks for gone processes’ segments every five seconds', async (t) => {
    const timers = mockedIntervals(t);
    const root = tempRoot(t);
    const gone = row();
    await leaveBehind(root, (j) => j.append(gone, true));
    const { recorder, ids } = memoryRecorder();
    const j = journal(root, { recorder });
    j.open(DATABASE);
    j.startBackground();
    timers.tick(5000);
    t.same(ids(), [gone.id], 'replayed');
    await j.close();
  });

  t.test('a look that fails is logged, and the next one replays what it had claimed', async (t) => {
    const timers = mockedIntervals(t);
    const root = tempRoot(t);
    const gone = row();
    await leaveBehind(root, (j) => j.append(gone, true));
    const { recorder, ids, failNext } = memoryRecorder();
    const logs = capturingLogger();
    const j = journal(root, { recorder, logger: logs.log });
    j.open(DATABASE);
    j.startBackground();
    failNext();
    const failure = logs.next(ERROR);
    timers.tick(5000);
    t.match(await failure, { err: { message: 'database down' }, msg: /replaying segments of a gone process failed; will retry/ });
    t.same(ids(), []);
    timers.tick(5000);
    t.same(ids(), [gone.id]);
    await j.close();
  });
});

t.test('whose segments are replayed', async (t) => {
  const NOW = 100_000;
  const FRESH = NOW - 1_000;
  const STALE = NOW - 6_000;
  /** This host: pid 100; `running` maps the pids that run to their start times ('' when unknown). */
  const host = (self: Partial<OwnerRecord> = {}, running: Record<number, string> = { 200: '700' }): HostView => ({
    self: { instance: 'aaaaaaaaaaaaaaaa', host: 'h1', bootId: 'boot-1', pidNamespace: 'pid:[1]', pid: 100, startTicks: '500', ...self },
    now: () => NOW,
    startTicksOf: (pid) => running[pid] ?? null,
  });
  /** A process on this host, boot and pid namespace: pid 200, started at tick 700. */
  const owner = (overrides: Partial<OwnerRecord> = {}): OwnerRecord => ({
    instance: 'bbbbbbbbbbbbbbbb',
    host: 'h1',
    bootId: 'boot-1',
    pidNamespace: 'pid:[1]',
    pid: 200,
    startTicks: '700',
    ...overrides,
  });

  t.test('on this host, boot and pid namespace, the process table decides, whatever the heartbeat', async (t) => {
    const cases: Array<[string, OwnerRecord, HostView, boolean]> = [
      ['its pid is this process’s: an earlier incarnation (a container restarted as PID 1 again)', owner({ pid: 100 }), host(), true],
      ['no process has its pid', owner({ pid: 300 }), host(), true],
      ['no process has its pid, and it did not know its own start time', owner({ pid: 300, startTicks: null }), host(), true],
      ['its pid runs a process that started at another time (the pid was reused)', owner({ startTicks: '699' }), host(), true],
      ['its pid runs the process that wrote it', owner(), host(), false],
      ['its pid runs, and this host cannot tell when that process started', owner(), host({}, { 200: '' }), false],
      ['its pid runs, and it did not know its own start time', owner({ startTicks: null }), host(), false],
      ['this host rebooted since', owner({ bootId: 'boot-0' }), host(), true],
    ];
    for (const [name, record, here, gone] of cases) {
      t.equal(ownerIsGone(record, FRESH, here), gone, `${name}, heartbeat fresh`);
      t.equal(ownerIsGone(record, STALE, here), gone, `${name}, heartbeat stale`);
    }
  });

  t.test('a process this host cannot probe is gone once its heartbeat is older than the limit', async (t) => {
    const cases: Array<[string, OwnerRecord, HostView]> = [
      ['another host (its own boot)', owner({ host: 'h2', bootId: 'boot-2', pid: 100 }), host()],
      ['another host, whose boot is unknown', owner({ host: 'h2', bootId: null, pid: 100 }), host()],
      // Two hosts without /proc: nothing tells them apart but the name, and the pid is not this host's to probe.
      ['another host, neither knowing its boot or pid namespace', owner({ host: 'h2', bootId: null, pidNamespace: null, pid: 300 }), host({ bootId: null, pidNamespace: null })],
      ['another pid namespace (another container)', owner({ pidNamespace: 'pid:[2]', pid: 100 }), host()],
      ['this host, its boot unknown to it', owner({ bootId: null, pid: 100 }), host()],
      ['this host, whose own boot is unknown', owner({ pid: 100 }), host({ bootId: null })],
    ];
    for (const [name, record, here] of cases) {
      t.equal(ownerIsGone(record, FRESH, here), false, `${name}: alive while fresh`);
      t.equal(ownerIsGone(record, NOW - 5_000, here), false, `${name}: alive at exactly the limit`);
      t.equal(ownerIsGone(record, NOW - 5_001, here), true, `${name}: gone past it`);
      t.equal(ownerIsGone(record, STALE, here, 10_000), false, `${name}: the limit is the caller's`);
      t.equal(ownerIsGone(record, null, here, 1_000_000), true, `${name}: gone with no heartbeat at all`);
    }
  });

  t.test('no owner record: gone', async (t) => {
    t.equal(ownerIsGone(null, null, host()), true);
  });

  t.test('this process as /proc shows it: its boot, pid namespace, and start in clock ticks since boot', { skip: withoutProc }, async (t) => {
    const { self, startTicksOf } = localHost('0123456789abcdef');
    t.match(self.bootId, /^[0-9a-f-]{36}$/);
    t.match(self.pidNamespace, /^pid:\[\d+\]$/);
    const uptime = Number(readFileSync('/proc/uptime', 'utf8').split(' ')[0]);
    // USER_HZ is 100 on Linux; the process started process.uptime() seconds ago.
    t.ok(Math.abs(Number(self.startTicks) / 100 - (uptime - process.uptime())) < 5, `started at tick ${self.startTicks}`);
    t.equal(startTicksOf(process.pid), self.startTicks, 'a running pid reads as its start');
    t.equal(startTicksOf(2 ** 22 + 17), null, 'a pid no process has reads as none');
  });

  t.test('without /proc nothing is known of boot, namespace or start, and pids are probed with signal 0', async (t) => {
    const bare = localHost('0123456789abcdef', tempRoot(t));
    t.strictSame([bare.self.bootId, bare.self.pidNamespace, bare.self.startTicks], [null, null, null]);
    t.equal(bare.startTicksOf(process.pid), '', 'a running pid: running, its start unknown');
    t.equal(bare.startTicksOf(2 ** 22 + 17), null, 'a pid no process has: none');
    // Signal 0 to another user's process is refused (EPERM), yet it runs; root may signal every process.
    if (process.getuid?.() !== 0) t.equal(bare.startTicksOf(1), '', 'another user’s pid 1 runs');
  });
});

t.test('replay', async (t) => {
  t.test('stores a gone process’s calls in transactions of batchSize rows', async (t) => {
    const root = tempRoot(t);
    const rows = Array.from({ length: 4 }, () => row());
    await leaveBehind(root, (j) => {
      for (const r of rows) j.append(r, true);
    });
    const { recorder, batches } = memoryRecorder();
    const next = journal(root, { recorder });
    next.open(DATABASE);
    t.match(await next.recover(), { segments: 1, calls: 4, inserted: 4, unreadableLines: 0 });
    t.same(
      batches.map((batch) => batch.map((r) => r.id)),
      [rows.slice(0, 2).map((r) => r.id), rows.slice(2).map((r) => r.id)],
    );
    await next.close();
  });

  t.test('deletes the segments it replayed and the gone process’s owner record', async (t) => {
    const root = tempRoot(t);
    await leaveBehind(root, (j) => j.append(row(), true));
    const next = journal(root, { recorder: memoryRecorder().recorder });
    next.open(DATABASE);
    await next.recover();
    t.same(files(root), [`${next.id}.000001.seg`, `${next.id}.owner`].sort());
    await next.close();
  });

  t.test('removes the owner record of a gone process that left no segment', async (t) => {
    const root = tempRoot(t);
    const next = journal(root, { recorder: memoryRecorder().recorder });
    next.open(DATABASE);
    const dead = { ...localHost('cccccccccccccccc').self };
    writeFileSync(join(root, DATABASE, `${dead.instance}.owner`), JSON.stringify(dead));
    await next.recover();
    t.notOk(existsSync(join(root, DATABASE, `${dead.instance}.owner`)));
    await next.close();
  });

  t.test('replays segments whose owner record is missing', async (t) => {
    const root = tempRoot(t);
    const gone = row();
    const dead = await leaveBehind(root, (j) => j.append(gone, true));
    unlinkSync(join(root, DATABASE, `${dead.id}.owner`));
    const { recorder, ids } = memoryRecorder();
    const next = journal(root, { recorder });
    next.open(DATABASE);
    t.match(await next.recover(), { segments: 1, calls: 1 });
    t.same(ids(), [gone.id]);
    await next.close();
  });

  t.test('leaves alone the files in the folder that are not the journal’s', async (t) => {
    const root = tempRoot(t);
    const next = journal(root, { recorder: memoryRecorder().recorder });
    next.open(DATABASE);
    const strangers = [
      'dddddddddddddddd.owner.tmp', // the owner record of a process that is starting, being written
      'notes-ab.000001.seg',
      'ab.000001.seg.bak',
      'README',
    ];
    for (const name of strangers) writeFileSync(join(root, DATABASE, name), encodeRecord('row', row()));
    t.match(await next.recover(), { segments: 0, calls: 0 });
    for (const name of strangers) t.ok(existsSync(join(root, DATABASE, name)), name);
    await next.close();
  });

  t.test('skips a segment another replica claimed first, and replays the rest', async (t) => {
    const root = tempRoot(t);
    const [first, second] = [row(), row()];
    await leaveBehind(root, (j) => j.append(first, true));
    await leaveBehind(root, (j) => j.append(second, true));
    const { recorder, ids } = memoryRecorder();
    const next = journal(root, { recorder });
    next.open(DATABASE);
    const realRename = fs.renameSync;
    let rival: string | null = null;
    const claimedFirst = ((from: fs.PathLike, to: fs.PathLike) => {
      if (rival === null) {
        rival = join(root, DATABASE, `eeeeeeeeeeeeeeee.claimed.${String(from).split('/').at(-1)}`);
        realRename(from, rival);
      }
      realRename(from, to);
    }) as typeof fs.renameSync;
    let report: unknown;
    await withFs('renameSync', claimedFirst, async () => {
      report = await next.recover();
    });
    t.match(report, { segments: 1, calls: 1 });
    t.equal(ids().length, 1);
    t.notOk(readFileSync(rival!, 'utf8').includes(ids()[0]!), 'not the one the rival holds');
    await next.close();
  });

  t.test('a look that cannot claim a segment, or delete one it replayed, fails (logged, tried again) instead of passing over it', async (t) => {
    const root = tempRoot(t);
    await leaveBehind(root, (j) => j.append(row(), true));
    const next = journal(root, { recorder: memoryRecorder().recorder });
    next.open(DATABASE);
    await withFs('renameSync', failing('EACCES') as typeof fs.renameSync, () => t.rejects(next.recover(), { code: 'EACCES' }));
    const realUnlink = fs.unlinkSync;
    const replayedStay = ((path: fs.PathLike) => {
      if (String(path).includes('.claimed.')) failing('EACCES')();
      realUnlink(path);
    }) as typeof fs.unlinkSync;
    await withFs('unlinkSync', replayedStay, () => t.rejects(next.recover(), { code: 'EACCES' }));
    t.match(await next.recover(), { segments: 1, calls: 1 }, 'replayed again, which bills nothing twice');
    await next.close();
  });

  t.test('looks again when asked after the last look has finished', async (t) => {
    const root = tempRoot(t);
    const next = journal(root, { recorder: memoryRecorder().recorder });
    next.open(DATABASE);
    t.match(await next.recover(), { segments: 0 });
    await leaveBehind(root, (j) => j.append(row(), true));
    t.match(await next.recover(), { segments: 1, calls: 1 });
    await next.close();
  });

  t.test('replays, at its next look, the segments a failed look had claimed', async (t) => {
    const root = tempRoot(t);
    const gone = row();
    await leaveBehind(root, (j) => j.append(gone, true));
    const { recorder, ids, failNext } = memoryRecorder();
    const next = journal(root, { recorder });
    next.open(DATABASE);
    failNext();
    await t.rejects(next.recover(), { message: 'database down' });
    t.equal(segments(root).filter((name) => name.startsWith(`${next.id}.claimed.`)).length, 1, 'claimed, not stored');
    t.match(await next.recover(), { segments: 1, calls: 1, inserted: 1 });
    t.same(ids(), [gone.id]);
    await next.close();
  });

  t.test('is logged with its report: at info when every line was read, at warn when torn lines were skipped', async (t) => {
    const root = tempRoot(t);
    const logs = capturingLogger();
    const next = journal(root, { recorder: memoryRecorder().recorder, logger: logs.log });
    next.open(DATABASE);
    await leaveBehind(root, (j) => j.append(row(), true));
    await next.recover();
    const dead = await leaveBehind(root, (j) => j.append(row(), true));
    appendFileSync(join(root, DATABASE, `${dead.id}.000001.seg`), encodeRecord('row', row()).slice(0, 60));
    await next.recover();
    t.strictSame(
      logs.lines.map(({ level, msg, segments: replayed, calls, inserted, unreadableLines }) => ({ level, msg, segments: replayed, calls, inserted, unreadableLines })),
      [
        { level: INFO, msg: 'billing journal: replayed the segments of a gone process', segments: 1, calls: 1, inserted: 1, unreadableLines: 0 },
        {
          level: WARN,
          msg: 'billing journal: replayed the segments of a gone process (unreadable lines, torn by the crash, were skipped)',
          segments: 1,
          calls: 1,
          inserted: 1,
          unreadableLines: 1,
        },
      ],
    );
    await next.close();
  });

  t.test('a look that finds nothing to replay logs nothing', async (t) => {
    const root = tempRoot(t);
    const logs = capturingLogger();
    const next = journal(root, { logger: logs.log });
    next.open(DATABASE);
    await next.recover();
    t.same(logs.lines, []);
    await next.close();
  });
});

for (const backend of databaseBackends()) {
  t.test(`replay on ${backend.name}`, async (t) => {
    const { db, cleanup } = await backend.create();
    t.teardown(cleanup);
    await runMigrations(db, [...coreMigrations, ...meteringMigrations]);
    const { organization } = await createOrganizationWithOwner(db, sqlIdentityStores, { name: 'Acme', ownerEmail: 'boss@acme.test', ownerName: 'Boss' });
    const ledger = new SqlCreditLedger(db);
    await ledger.ensureAccount(organization.id, 1_000_000n);
    const recorder = new SqlUsageRecorder(db);
    const orgRow = (overrides: Partial<RequestLogRow> = {}) => row({ organizationId: organization.id, ...overrides });
    const storedCost = async () => (await db.query<{ micros: bigint }>('SELECT coalesce(sum(cost_micros), 0)::bigint AS micros FROM request_logs')).rows[0]!.micros;
    const balance = async () => (await ledger.balance(organization.id))!;

    /**
     * A journal whose process ended with rows the database never got: closed, so its files stay as
     * a killed process leaves them; its pid is this process's, so a later instance counts it gone.
     */
    async function deadWith(root: string, fill: (j: BillingJournal) => void): Promise<BillingJournal> {
      const j = journal(root, { recorder });
      j.open(DATABASE);
      fill(j);
      await j.close();
      return j;
    }

    t.test('a gone process’s calls are stored and charged once; replaying the same segments again bills nothing', async (t) => {
      const root = tempRoot(t);
      const rows = [orgRow({ costMicros: 100n }), orgRow({ costMicros: 250n }), orgRow({ costMicros: 1n })];
      await deadWith(root, (j) => {
        for (const r of rows) j.append(r, true);
      });
      const copy = join(tempRoot(t), 'copy');
      cpSync(root, copy, { recursive: true });
      const before = await balance();

      const first = journal(root, { recorder });
      first.open(DATABASE);
      t.match(await first.recover(), { segments: 1, calls: 3, inserted: 3, unreadableLines: 0 });
      t.equal(await balance(), before - 351n);
      t.same(segments(root), [`${first.id}.000001.seg`], 'replayed segments are deleted');

      // The same files again, as if the replaying process died after its commit and before deleting them.
      rmSync(root, { recursive: true });
      cpSync(copy, root, { recursive: true });
      const second = journal(root, { recorder });
      second.open(DATABASE);
      t.match(await second.recover(), { segments: 1, calls: 3, inserted: 0 });
      t.equal(await balance(), before - 351n, 'charged once');
      await first.close();
      await second.close();
    });

    t.test('a torn last line is skipped and reported; the lines before it are replayed', async (t) => {
      const root = tempRoot(t);
      const whole = [orgRow(), orgRow()];
      await deadWith(root, (j) => {
        for (const r of whole) j.append(r, true);
      });
      const [segment] = segments(root);
      appendFileSync(join(root, DATABASE, segment!), encodeRecord('row', orgRow()).slice(0, 60));
      const next = journal(root, { recorder });
      next.open(DATABASE);
      t.match(await next.recover(), { segments: 1, calls: 2, inserted: 2, unreadableLines: 1 });
      const stored = await db.query<{ id: string }>('SELECT id FROM request_logs WHERE id = ANY($1::text[])', [whole.map((r) => r.id)]);
      t.equal(stored.rows.length, 2);
      await next.close();
    });

    t.test('a call admitted and never settled is billed its counted input as gateway_interrupted; a settled one its own row', async (t) => {
      const root = tempRoot(t);
      const cut = orgRow({ streamed: true });
      const done = orgRow({ streamed: true });
      await deadWith(root, (j) => {
        j.admitted(provisionalOf(cut));
        j.admitted(provisionalOf(done));
        j.append({ ...done, costMicros: 40n }, true);
      });
      const costBefore = await storedCost();
      const next = journal(root, { recorder });
      next.open(DATABASE);
      t.match(await next.recover(), { calls: 2, inserted: 2 });
      const stored = await db.query<{ id: string; status_code: number; error_code: string | null; usage_estimated: boolean; cost_micros: bigint }>(
        'SELECT id, status_code, error_code, usage_estimated, cost_micros FROM request_logs WHERE id = ANY($1::text[]) ORDER BY id',
        [[cut.id, done.id]],
      );
      t.same(stored.rows, [
        { id: cut.id, status_code: 500, error_code: 'gateway_interrupted', usage_estimated: true, cost_micros: 10n },
        { id: done.id, status_code: 200, error_code: null, usage_estimated: false, cost_micros: 40n },
      ]);
      t.equal(await storedCost(), costBefore + 50n);
      await next.close();
    });

    /** A call's provisional record (its counted input, as admission journals it) and its own row. */
    const callRecords = () => {
      const own = orgRow({ costMicros: 40n });
      return { own, provisional: provisionalOf(own) };
    };
    const storedRow = async (id: string) => (await db.query<{ error_code: string | null; cost_micros: bigint }>('SELECT error_code, cost_micros FROM request_logs WHERE id = $1', [id])).rows;
    const usageCharged = async () =>
      (
        await db.query<{ micros: bigint; entries: number }>(
          "SELECT coalesce(-sum(amount_micros), 0)::bigint AS micros, coalesce(sum(covers_entries), 0)::int AS entries FROM credit_ledger WHERE organization_id = $1 AND kind = 'ai_usage'",
          [organization.id],
        )
      ).rows[0]!;

    for (const order of ['the call’s own row first', 'its provisional record first'] as const) {
      t.test(`a call is billed once, by its own row, whichever of its two records a replay reads first (${order})`, async (t) => {
        const { own, provisional } = callRecords();
        const texts = [encodeRecord('row', own), encodeAdmitted(provisional)];
        if (order === 'its provisional record first') texts.reverse();
        t.same(readCalls(texts).rows, [own], 'across segments');
        t.same(readCalls([texts.join('')]).rows, [own], 'within one segment');

        // The two records in two segments replayed one after the other (a replica took the first
        // for a stalled process's and replayed it; the process wrote the second and died later).
        const root = tempRoot(t);
        const [first, second] =
          order === 'its provisional record first'
            ? [(j: BillingJournal) => j.admitted(provisional), (j: BillingJournal) => j.append(own, true)]
            : [(j: BillingJournal) => j.append(own, true), (j: BillingJournal) => j.admitted(provisional)];
        const [balanceBefore, chargedBefore] = [await balance(), await usageCharged()];
        for (const fill of [first, second]) {
          await deadWith(root, fill);
          const next = journal(root, { recorder });
          next.open(DATABASE);
          await next.recover();
          await next.close();
        }
        t.same(await storedRow(own.id), [{ error_code: null, cost_micros: 40n }], 'the log holds the call’s own row');
        t.equal(await balance(), balanceBefore - 40n, 'the balance is charged its cost once');
        const charged = await usageCharged();
        t.equal(charged.micros - chargedBefore.micros, 40n, 'the ledger’s usage lines add up to it');
        t.equal(charged.entries - chargedBefore.entries, 1, 'and cover one request-log row');
      });
    }

    t.test('a call whose own row costs less than its provisional one stored earlier is given the difference back', async (t) => {
      const { own, provisional } = callRecords();
      const failed: RequestLogRow = { ...own, statusCode: 502, errorCode: 'upstream_error', inputTokens: 0, outputTokens: 0, costMicros: 0n };
      const before = await balance();
      t.equal(await recorder.record([provisionalRow(provisional)]), 1);
      t.equal(await balance(), before - 10n);
      t.equal(await recorder.record([failed]), 1, 'the provisional row is replaced');
      t.same(await storedRow(own.id), [{ error_code: 'upstream_error', cost_micros: 0n }]);
      t.equal(await balance(), before, 'nothing charged for a call that produced nothing');
    });

    t.test('a gone process’s calls are stored with their units, and charged their cost', async (t) => {
      const root = tempRoot(t);
      const image = orgRow({ units: { images: { count: 2, size: '1024x1024', quality: 'hd' } }, costMicros: 160_000n, unitsCostMicros: 160_000n });
      const spoken = { ...provisionalOf(orgRow({ inputTokens: 0 }), 15_000n), units: { characters: 1000 }, unitsCostMicros: 15_000n };
      await deadWith(root, (j) => {
        j.append(image, true);
        j.admitted(spoken);
      });
      const before = await balance();
      const next = journal(root, { recorder });
      next.open(DATABASE);
      t.match(await next.recover(), { calls: 2, inserted: 2 });
      t.equal(await balance(), before - 175_000n, 'both calls charged, units included');
      const { rows } = await db.query(
        'SELECT id, images, image_size, image_quality, characters, units_cost_micros::text AS units_cost FROM request_logs WHERE id = ANY($1::text[]) ORDER BY images DESC',
        [[image.id, spoken.id]],
      );
      t.same(rows, [
        { id: image.id, images: 2, image_size: '1024x1024', image_quality: 'hd', characters: 0, units_cost: '160000' },
        { id: spoken.id, images: 0, image_size: null, image_quality: null, characters: 1000, units_cost: '15000' },
      ]);
      await next.close();
    });

    t.test('the segments of a live process are left alone', async (t) => {
      const root = tempRoot(t);
      const live = journal(root, { recorder, host: liveElsewhere() });
      live.open(DATABASE);
      live.append(orgRow(), true);
      await live.close();
      const next = journal(root, { recorder });
      next.open(DATABASE);
      t.match(await next.recover(), { segments: 0, calls: 0 });
      t.ok(
        segments(root).some((name) => name.startsWith(live.id)),
        'still there',
      );
    });

    t.test('two replicas starting at once replay each segment once', async (t) => {
      const root = tempRoot(t);
      const rows = Array.from({ length: 5 }, () => orgRow({ costMicros: 7n }));
      for (const r of rows) await deadWith(root, (j) => j.append(r, true));
      const before = await balance();
      const [a, b] = [journal(root, { recorder }), journal(root, { recorder })];
      a.open(DATABASE);
      b.open(DATABASE);
      const reports = await Promise.all([a.recover(), b.recover()]);
      t.equal(reports[0].segments + reports[1].segments, 5, 'every segment claimed by exactly one');
      t.equal(reports[0].inserted + reports[1].inserted, 5);
      t.equal(await balance(), before - 35n);
      await a.close();
      await b.close();
    });

    t.test('an unreadable owner record does not stop the replay of its segments', async (t) => {
      const root = tempRoot(t);
      const dead = await deadWith(root, (j) => j.append(orgRow(), true));
      writeFileSync(join(root, DATABASE, `${dead.id}.owner`), '{"torn');
      const next = journal(root, { recorder });
      next.open(DATABASE);
      t.match(await next.recover(), { segments: 1, inserted: 1 });
      await next.close();
    });
  });
}
