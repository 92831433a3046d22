import t from 'tap';
import type { RequestLogRow } from '../../../core/ports/metering.ts';
import { priceSchema } from '../../../plugins/inference/inference-config.ts';
import { decodeRecord, encodeAdmitted, encodeRecord, type ProvisionalCall } from '../../../plugins/metering/billing-journal.ts';
import { batchPrices, batchSheet, priceSheet } from '../../../plugins/metering/pricing.ts';
import { TEST_PRICES } from '../../helpers/gateway.ts';
import { requestLogRow } from '../../helpers/request-log-rows.ts';

/**
 * What marks a batch line apart from a live call, below the gateway: its prices (a model's
 * `prices.batch` over the live ones) and its hold and batch in the billing journal's records.
 * test/plugins/metering/spend-holds.test.ts drives them end to end.
 */

const HOLD_ID = '00000000-0000-4000-8000-00000000beef';

t.test('batch prices replace the live ones field by field, and the rest stay live', async (t) => {
  t.same(batchPrices({ ...TEST_PRICES, batch: { inputPerMTokUsd: 0.5 } }), { inputPerMTokUsd: 0.5, cachedInputPerMTokUsd: 0.5, outputPerMTokUsd: 2 });
});

t.test('a model without batch prices bills batch lines with its live sheet', async (t) => {
  const live = priceSheet('m', TEST_PRICES);
  t.equal(batchSheet('m', TEST_PRICES, live), live);
});

t.test('a batch line’s sheet has a price version of its own; adding batch prices leaves the live version as it was', async (t) => {
  const withBatch = { ...TEST_PRICES, batch: { outputPerMTokUsd: 1 } };
  const live = priceSheet('m', withBatch);
  t.equal(live.version, priceSheet('m', TEST_PRICES).version);
  const batch = batchSheet('m', withBatch, live);
  t.not(batch.version, live.version);
  t.equal(batch.picoPerOutputToken, 1_000_000n, '1 µ$ an output token');
});

t.test('the price schema refuses an unknown field in batch, naming it', async (t) => {
  const parsed = priceSchema.safeParse({ ...TEST_PRICES, batch: { inputPerMTokUsd: 0.5, outputPerMtokUsd: 1 } });
  t.notOk(parsed.success);
  t.match(JSON.stringify(parsed.error?.issues), /outputPerMtokUsd/);
});

/** A batch line's row at a fixed instant, so a record read back compares equal. */
const line = (overrides: Partial<RequestLogRow> = {}): RequestLogRow => requestLogRow({ createdAt: new Date(1_700_000_000_123), holdId: HOLD_ID, batchId: 'batch_abc', ...overrides });

const provisionalOf = (r: RequestLogRow, extra: Partial<ProvisionalCall> = {}): ProvisionalCall => ({
  id: r.id,
  context: {
    organizationId: r.organizationId,
    projectId: r.projectId,
    keyId: r.keyId,
    endpoint: r.endpoint,
    model: r.model!,
    priceVersion: r.priceVersion!,
    streamed: r.streamed,
    holdId: HOLD_ID,
    batchId: 'batch_abc',
  },
  inputTokens: r.inputTokens,
  costMicros: 10n,
  createdAt: r.createdAt,
  ...extra,
});

t.test('a batch line’s row survives the journal’s round trip with its hold and batch', async (t) => {
  const original = line({ units: { characters: 3 }, unitsCostMicros: 1n });
  t.strictSame(decodeRecord(encodeRecord('row', original).trimEnd()), { kind: 'row', row: original });
});

t.test('a row that is no batch line is journaled as before, without the two columns', async (t) => {
  const plain = requestLogRow({ createdAt: new Date(1_700_000_000_123) });
  t.equal((JSON.parse(encodeRecord('row', plain)) as unknown[]).length, 32);
  t.equal((JSON.parse(encodeRecord('row', line())) as unknown[]).length, 34);
});

t.test('a batch line’s provisional record keeps its hold and batch: a crash bills it against the hold', async (t) => {
  const decoded = decodeRecord(encodeAdmitted(provisionalOf(line({ inputTokens: 7 }))).trimEnd());
  t.match(decoded, { kind: 'started', row: { inputTokens: 7, holdId: HOLD_ID, batchId: 'batch_abc', errorCode: 'gateway_interrupted' } });
  t.equal(decoded?.row.units, undefined, 'a line without input units has none');
});

t.test('a batch line’s provisional record keeps its input units too', async (t) => {
  const call = provisionalOf(line(), { units: { characters: 40 }, unitsCostMicros: 6n });
  t.match(decodeRecord(encodeAdmitted(call).trimEnd()), { row: { units: { characters: 40 }, unitsCostMicros: 6n, holdId: HOLD_ID, batchId: 'batch_abc' } });
});

t.test('a batch line’s provisional record with a hold or units of the wrong type is a torn line', async (t) => {
  const values = JSON.parse(encodeAdmitted(provisionalOf(line()))) as unknown[];
  t.equal(values.length, 16);
  for (const [position, wrong] of [
    [12, 5],
    [13, '1'],
    [13, null],
    [14, 7],
    [14, null],
    [15, 7],
  ] as const) {
    t.equal(decodeRecord(JSON.stringify(values.with(position, wrong))), null, `position ${position} = ${JSON.stringify(wrong)}`);
  }
});
