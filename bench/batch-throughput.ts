/**
 * Section 7 of bench/gateway-overhead.ts: a batch's lines per second through the worker (upload,
 * create, every line run as a durable job, output file written) next to the same lines sent as live
 * calls, at the same concurrency as the batch's per-organisation limit, against the same gateway.
 * What the difference shows is what the durable path costs per line: the job claims and fenced
 * completions, the line and batch rows, the finalization.
 */
import { setTimeout as sleep } from 'node:timers/promises';

export interface BatchThroughput {
  lines: number;
  concurrency: number;
  batchSeconds: number;
  liveSeconds: number;
  batchLinesPerSecond: number;
  liveCallsPerSecond: number;
}

/** Must match the gateway's `plugins.batches.perOrganizationConcurrency` (its default). */
export const BATCH_CONCURRENCY = 8;

export async function measureBatchThroughput(gatewayUrl: string, key: string, model: string, lines: number): Promise<BatchThroughput> {
  const auth = { authorization: `Bearer ${key}` };
  const body = (i: number) => ({ model, max_tokens: 16, messages: [{ role: 'user', content: `batch line ${i}: say something short` }] });

  const form = new FormData();
  form.append('purpose', 'batch');
  const jsonl = Array.from({ length: lines }, (_, i) => JSON.stringify({ custom_id: `l${i}`, method: 'POST', url: '/v1/chat/completions', body: body(i) })).join('\n');
  form.append('file', new Blob([jsonl]), 'bench.jsonl');
  const uploaded = await fetch(`${gatewayUrl}/v1/files`, { method: 'POST', headers: auth, body: form });
  if (uploaded.status !== 200) throw new Error(`batch file upload failed: ${uploaded.status} ${await uploaded.text()}`);
  const fileId = ((await uploaded.json()) as { id: string }).id;

  const batchStarted = performance.now();
  const created = await fetch(`${gatewayUrl}/v1/batches`, {
    method: 'POST',
    headers: { ...auth, 'content-type': 'application/json' },
    body: JSON.stringify({ input_file_id: fileId, endpoint: '/v1/chat/completions', completion_window: '24h' }),
  });
  if (created.status !== 200) throw new Error(`batch creation failed: ${created.status} ${await created.text()}`);
  const batchId = ((await created.json()) as { id: string }).id;
  // Polling is the client's only way to learn the end; every 20 ms keeps its own cost small.
  for (;;) {
    const batch = (await (await fetch(`${gatewayUrl}/v1/batches/${batchId}`, { headers: auth })).json()) as { status: string; request_counts: { completed: number } };
    if (batch.status === 'completed') {
      if (batch.request_counts.completed !== lines) throw new Error(`the bench batch completed ${batch.request_counts.completed} of ${lines} lines`);
      break;
    }
    if (['failed', 'cancelled', 'expired'].includes(batch.status)) throw new Error(`the bench batch ended ${batch.status}`);
    await sleep(20);
  }
  const batchSeconds = (performance.now() - batchStarted) / 1000;

  const liveStarted = performance.now();
  let next = 0;
  const worker = async () => {
    while (next < lines) {
      const i = next++;
      const answer = await fetch(`${gatewayUrl}/v1/chat/completions`, { method: 'POST', headers: { ...auth, 'content-type': 'application/json' }, body: JSON.stringify(body(i)) });
      await answer.arrayBuffer();
      if (answer.status !== 200) throw new Error(`a live call answered ${answer.status}`);
    }
  };
  await Promise.all(Array.from({ length: BATCH_CONCURRENCY }, worker));
  const liveSeconds = (performance.now() - liveStarted) / 1000;

  return { lines, concurrency: BATCH_CONCURRENCY, batchSeconds, liveSeconds, batchLinesPerSecond: lines / batchSeconds, liveCallsPerSecond: lines / liveSeconds };
}
