import type { Test } from 'tap';
import { Tokens } from '../../../../core/kernel/di-tokens.ts';
import { newRequestId } from '../../../../core/kernel/request-ids.ts';
import { type AppRequestRow, AppRequestRows } from '../../../../plugins/apps/proxy/request-rows.ts';
import { buildTestApp, type TestApp } from '../../../helpers/app.ts';
import { storedApp } from '../apps-fixtures.ts';

export { storedApp };

/** Hosting prices the usage tests price with: 0.2 ¢ an hour for 256 MiB, doubling with each doubling of memory. */
export const TEST_HOSTING_PRICES = [
  { memoryMiB: 256, usdPerHour: 0.002 },
  { memoryMiB: 512, usdPerHour: 0.004 },
  { memoryMiB: 1024, usdPerHour: 0.008 },
  { memoryMiB: 2048, usdPerHour: 0.016 },
  { memoryMiB: 4096, usdPerHour: 0.032 },
];

/** A service with the apps plugin (no HTTP listener needed) whose clock the test moves. */
export async function trafficServer(t: Test, now: { at: Date }): Promise<TestApp> {
  return buildTestApp(t, {
    clock: () => now.at,
    plugins: { keys: {}, projects: {}, githost: {}, apps: { proxy: { port: 0 }, hosting: { prices: TEST_HOSTING_PRICES } } },
  });
}

export type RowInput = Partial<AppRequestRow> & { at: Date };

/**
 * Writes rows through the proxy's own batched writer (proxy/request-rows.ts), as the proxy does,
 * and answers them as written.
 */
export async function writeRows(test: TestApp, owner: { appId: string; serviceId: string; deploymentId: string }, inputs: readonly RowInput[]): Promise<AppRequestRow[]> {
  const database = test.app.svc.container.resolve(Tokens.Database);
  const writer = new AppRequestRows(database, { flushIntervalMs: 60_000, batchSize: 1_000, maxQueue: 10_000 }, (event) => {
    throw new Error(`request rows: ${event.kind}`);
  });
  const rows = inputs.map((input) => ({
    id: newRequestId(input.at.getTime()),
    organizationId: test.organizationId,
    method: 'GET',
    path: '/',
    status: 200,
    durationMs: 1.5,
    bytesIn: 0,
    bytesOut: 100,
    ...owner,
    ...input,
  }));
  for (const row of rows) writer.record(row);
  await writer.flush();
  return rows;
}

/** Newest first by (at, id), the lists' order. */
export function newestFirst(rows: readonly AppRequestRow[]): AppRequestRow[] {
  return [...rows].sort((a, b) => b.at.getTime() - a.at.getTime() || (a.id < b.id ? 1 : a.id > b.id ? -1 : 0));
}
