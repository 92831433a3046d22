/**
 * What the billing journal adds to a call on the hot path: the record's encoding and its one
 * synchronous write, measured in one process on the data directory's file system (ext4 here),
 * with segments rotated and deleted as the writer's flushes would (a flush every 500 rows).
 *
 *   npx tsx bench/billing-journal.ts [calls]     (default 200,000)
 *
 * Prints CPU µs per call (user + kernel; wall-clock too, which a busy machine inflates) for a call
 * (JSON or streamed alike: a provisional record when it is admitted, then its row when it settles),
 * one record alone (what a JSON call cost before calls were journaled at admission), and the
 * encoding alone.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Fastify from 'fastify';
import { BillingJournal, type CallContext, encodeRecord } from '../plugins/metering/billing-journal.ts';
import type { RequestLogRow } from '../core/ports/metering.ts';

const calls = Number(process.argv[2] ?? 200_000);
const FLUSH_EVERY = 500;

function row(i: number): RequestLogRow {
  return {
    id: `req_01a2091d71c1${i.toString(16).padStart(20, '0')}`,
    organizationId: '5f0c7f0e-9a43-4b59-9a0e-6f3c2d1b7a10',
    projectId: '0b6a3c1e-2d4f-4a8b-9c7d-1e2f3a4b5c6d',
    keyId: '7d9e1f2a-3b4c-4d5e-8f6a-7b8c9d0e1f2a',
    endpoint: '/v1/chat/completions',
    model: 'gpt-4o-mini',
    provider: 'openai',
    upstreamModel: 'gpt-4o-mini-2024-07-18',
    statusCode: 200,
    errorCode: null,
    inputTokens: 412,
    cachedInputTokens: 0,
    cacheWriteTokens: 0,
    outputTokens: 128,
    reasoningTokens: 0,
    usageEstimated: false,
    costMicros: 139n,
    priceVersion: 'b3f1c2d4e5f6a7b8',
    latencyMs: 812,
    ttftMs: 240,
    streamed: false,
    attempts: 1,
    createdAt: new Date(),
    bodies: null,
  };
}

function measure(name: string, body: (i: number) => void): number {
  for (let i = 0; i < 20_000; i += 1) body(i); // warm-up
  const start = process.hrtime.bigint();
  const cpu = process.cpuUsage();
  for (let i = 0; i < calls; i += 1) body(i);
  const wall = Number(process.hrtime.bigint() - start) / 1000 / calls;
  const used = process.cpuUsage(cpu);
  const perCall = (used.user + used.system) / calls;
  console.log(`${name.padEnd(48)} ${perCall.toFixed(2)} µs CPU per call (${(used.system / calls).toFixed(2)} of it in the kernel), ${wall.toFixed(2)} µs wall`);
  return perCall;
}

const root = mkdtempSync(join(tmpdir(), 'svc-journal-bench-'));
const journal = new BillingJournal({ record: async (rows) => rows.length }, { root, segmentBytes: 1024 * 1024, batchSize: 500 }, Fastify({ logger: false }).log);
journal.open('bench');
const rows = Array.from({ length: 1024 }, (_, i) => row(i));
let held = 0;
const flushed = () => {
  held += 1;
  if (held === FLUSH_EVERY) {
    journal.committed(held);
    held = 0;
  }
};

console.log(`${calls} calls, record ${Buffer.byteLength(encodeRecord('row', rows[0]!))} bytes`);
let sink = 0;
measure('encoding only (JSON.stringify of the record)', (i) => {
  sink += encodeRecord('row', rows[i & 1023]!).length;
});
measure('one record: append (encode + one writeSync)', (i) => {
  journal.append(rows[i & 1023]!, true);
  flushed();
});
// As governed-admission.ts does: a provisional record at admission (its context made once per
// credential and model), then the call's own row when it settles. The rows are built beforehand,
// as for one record alone: a call builds its row whether or not it is journaled.
const { organizationId, projectId, keyId, endpoint } = rows[0]!;
const context: CallContext = { organizationId, projectId, keyId, endpoint, model: 'gpt-4o-mini', priceVersion: 'b3f1c2d4e5f6a7b8', streamed: false };
measure('a call: admitted + append (two writes)', (i) => {
  const r = rows[i & 1023]!;
  journal.admitted({ id: r.id, context, inputTokens: r.inputTokens, costMicros: 41n, createdAt: r.createdAt });
  journal.append(r, true);
  flushed();
});
journal.committed(held);
await journal.close();
rmSync(root, { recursive: true, force: true });
if (sink < 0) console.log(sink);
