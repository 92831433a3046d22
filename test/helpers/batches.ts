import { toFile } from 'openai';
import type { Batch } from 'openai/resources/batches';
import { startGateway, type Gateway } from './gateway.ts';
import type { TapLike, TestAppOptions } from './app.ts';
import { eventually } from './eventually.ts';

/** Batch settings for tests: the hold released at once, small concurrency so a test can hold lines running. */
export const TEST_BATCHES = { holdReleaseDelayMs: 0, lineConcurrency: 4, perOrganizationConcurrency: 4 };

/**
 * A listening gateway (test/helpers/gateway.ts) whose `solo` model takes batches and whose
 * `mock-small` does not; batches run by the app's own worker.
 */
export function batchGateway(t: TapLike, options: { batches?: Record<string, unknown>; config?: TestAppOptions['config']; clock?: TestAppOptions['clock'] } = {}): Promise<Gateway> {
  return startGateway(t, {
    config: options.config,
    clock: options.clock,
    inferenceModels: { solo: { batch: true } },
    plugins: { batches: { ...TEST_BATCHES, ...options.batches } },
  });
}

/** One line of a batch input file calling chat completions on `model`. */
export function chatLine(customId: string, model = 'solo', content = `request ${customId}`): Record<string, unknown> {
  return { custom_id: customId, method: 'POST', url: '/v1/chat/completions', body: { model, max_tokens: 50, messages: [{ role: 'user', content }] } };
}

/** Uploads lines as a `batch` file with the gateway's client; returns the file id. */
export async function uploadLines(gateway: Gateway, lines: readonly unknown[], client = gateway.client): Promise<string> {
  const jsonl = `${lines.map((line) => JSON.stringify(line)).join('\n')}\n`;
  const file = await client.files.create({ file: await toFile(Buffer.from(jsonl), 'batch.jsonl'), purpose: 'batch' });
  return file.id;
}

const ENDED = new Set(['completed', 'failed', 'cancelled', 'expired']);

/** Runs due jobs until the batch has ended (its lines, then its finalization), and returns it. */
export async function untilEnded(gateway: Gateway, id: string, client = gateway.client): Promise<Batch> {
  let batch: Batch | undefined;
  await eventually(
    async () => {
      await gateway.test.app.svc.workers.runUntilIdle();
      batch = await client.batches.retrieve(id);
      return ENDED.has(batch.status);
    },
    `batch ${id} to end`,
    { timeoutMs: 60_000, everyMs: 20 },
  );
  return batch!;
}

/** An output or error file's lines, parsed. */
export async function fileLines(gateway: Gateway, fileId: string): Promise<Array<Record<string, any>>> {
  const text = await (await gateway.client.files.content(fileId)).text();
  return text
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => JSON.parse(line));
}
