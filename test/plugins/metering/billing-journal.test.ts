import t, { type Test } from 'tap';
import Fastify from 'fastify';
import { appendFileSync, cpSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
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

function journal(root: string, options: { recorder?: UsageRecorder; segmentBytes?: number; host?: HostView } = {}): BillingJournal {
  return new BillingJournal(options.recorder ?? unusedRecorder, { root, segmentBytes: options.segmentBytes ?? 1 << 20, batchSize: 2 }, silent, options.host);
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
    t.same(decodeRecord(line.trimEnd()), { kind: 'row', row: original });
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
    t.equal(statSync(join(root, DATABASE)).mode & 0o777, 0o700);
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
    j.append(row(), false);
    j.append(row(), true);
    j.committed(1);
    await j.close();
    t.equal(segments(root).length, 1);
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

t.test('whose segments are replayed', async (t) => {
  const here = localHost('aaaaaaaaaaaaaaaa');
  const view = (now = 10_000): HostView => ({ ...here, now: () => now });
  const owner = (overrides: Partial<OwnerRecord>): OwnerRecord => ({ ...here.self, instance: 'bbbbbbbbbbbbbbbb', ...overrides });

  t.test('an earlier incarnation under this very pid is gone (a container restarted as PID 1 again)', async (t) => {
    t.equal(ownerIsGone(owner({ pid: process.pid }), 10_000, view()), true);
  });
  t.test('a pid no process has is gone', async (t) => {
    t.equal(ownerIsGone(owner({ pid: 2 ** 22 + 17 }), 10_000, view()), true);
  });
  t.test('a pid now held by a process that started at another time is gone (the pid was reused)', async (t) => {
    const parent = here.startTicksOf(process.ppid);
    t.equal(ownerIsGone(owner({ pid: process.ppid, startTicks: `${parent}1` }), 10_000, view()), true);
    t.equal(ownerIsGone(owner({ pid: process.ppid, startTicks: parent }), 10_000, view()), false, 'the same start time: alive');
  });
  t.test('the same host after a reboot: gone', async (t) => {
    t.equal(ownerIsGone(owner({ pid: process.ppid, bootId: 'another-boot' }), 10_000, view()), true);
  });
  t.test('another host or pid namespace cannot be probed: alive while its heartbeat is fresh', async (t) => {
    t.equal(ownerIsGone(owner({ host: 'elsewhere', pid: process.pid }), 9_000, view()), false);
    t.equal(ownerIsGone(owner({ host: 'elsewhere', pid: process.pid }), 4_000, view()), true);
    t.equal(ownerIsGone(owner({ pidNamespace: 'pid:[1]', pid: process.pid }), 9_000, view()), false);
    t.equal(ownerIsGone(owner({ pidNamespace: 'pid:[1]', pid: process.pid }), 4_000, view()), true);
  });
  t.test('no owner record: gone', async (t) => {
    t.equal(ownerIsGone(null, null, view()), true);
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
      t.same(
        segments(root).filter((name) => !name.startsWith(first.id)),
        [],
        'replayed segments are deleted',
      );

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
