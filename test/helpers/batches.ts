import { toFile } from 'openai';
import type { Batch } from 'openai/resources/batches';
import { startGateway, type Gateway } from './gateway.ts';
import type { TapLike, TestAppOptions } from './app.ts';
import { eventually } from './eventually.ts';
import type { TestClock } from './jobs.ts';
import { Tokens } from '../../core/kernel/di-tokens.ts';

/** Batch settings for tests: the hold released at once, small concurrency so a test can hold lines running. */
export const TEST_BATCHES = { holdReleaseDelayMs: 0, lineConcurrency: 4, perOrganizationConcurrency: 4 };

/**
 * A listening gateway (test/helpers/gateway.ts) whose `solo` model takes batches and whose
 * `mock-small` does not; batches run by the app's own worker.
 */
export function batchGateway(
  t: TapLike,
  options: { batches?: Record<string, unknown>; config?: TestAppOptions['config']; clock?: TestAppOptions['clock']; logStream?: TestAppOptions['logStream'] } = {},
): Promise<Gateway> {
  return startGateway(t, {
    config: options.config,
    clock: options.clock,
    logStream: options.logStream,
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

/**
 * Runs due jobs until the batch has ended (its lines, then its finalization), and returns it as the
 * client reads it. Watched in the database: polling the route would spend the key's request allowance.
 * With a test clock, each round moves it a second on.
 */
export async function untilEnded(gateway: Gateway, id: string, client = gateway.client, clock?: TestClock): Promise<Batch> {
  const database = gateway.test.app.svc.container.resolve(Tokens.Database);
  await eventually(
    async () => {
      await gateway.test.app.svc.workers.runUntilIdle();
      // A finalizer waiting for running lines looks again a second later, by this clock.
      clock?.advance(1_000);
      const row = await database.query<{ status: string }>('SELECT status FROM batches WHERE id = $1', [id]);
      return ENDED.has(row.rows[0]?.status ?? '');
    },
    `batch ${id} to end`,
    { timeoutMs: 60_000, everyMs: 20 },
  );
  return client.batches.retrieve(id);
}

/** An output or error file's lines, parsed. */
export async function fileLines(gateway: Gateway, fileId: string): Promise<Array<Record<string, any>>> {
  const text = await (await gateway.client.files.content(fileId)).text();
  return text
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => JSON.parse(line));
}
