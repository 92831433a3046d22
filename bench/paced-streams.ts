/**
 * The paced-stream section of bench/gateway-overhead.ts: chat answers streamed as a real model
 * streams them, twenty content chunks a few milliseconds apart, many at once. A stream sent in one
 * write (section 3) shows what a call costs to set up; this shows what users see while answers are
 * being produced: each chunk is a read, a parse or a copy and a write in whatever sits in between,
 * and under concurrency each stream's first token waits behind the other streams' chunks.
 *
 * The fake upstream (bench/upstream-process.ts) answers PACED_MODEL with PACED_REPLY, paced by its
 * own timers; every other model keeps the fake's default answer, so the other sections are unchanged.
 */
import type { Dispatcher } from 'undici';
import { readSse } from '../providers/http/sse-reader.ts';
import type { OpenAIReply } from '../test/fakes/fake-openai-upstream.ts';

/** The model name that asks the fake for a paced answer (the gateway routes it to the same name upstream). */
export const PACED_MODEL = 'gpt-4o-mini-paced';
export const PACED_CONTENT_CHUNKS = 20;
export const PACED_INTERVAL_MS = 5;
export const PACED_CONCURRENCY = 16;

/** Forty words: the fake streams two words per content chunk. */
const PACED_CONTENT =
  "A process owns its memory and resources, so a crash stays contained; threads share one process's memory, which makes " +
  'communication cheap but needs locks. Use processes to isolate tenants or untrusted work, and threads for parallel ' +
  'computation over shared data.';

/**
 * What the fake answers PACED_MODEL with: the role chunk with the first content chunk, then one
 * content chunk every PACED_INTERVAL_MS, then the finish chunk with the usage chunk and [DONE]
 * (21 writes, PACED_INTERVAL_MS apart).
 */
export const PACED_REPLY: Omit<OpenAIReply, 'kind'> = {
  content: PACED_CONTENT,
  usage: { prompt_tokens: 52, completion_tokens: 48 },
  chunkDelayMs: PACED_INTERVAL_MS,
  tokenPaced: true,
};

/** Whether an SSE `data:` payload is a chat chunk carrying content (the first one is the first token). */
export function carriesContent(data: string): boolean {
  try {
    const chunk = JSON.parse(data) as { choices?: Array<{ delta?: { content?: unknown } }> };
    return (chunk.choices ?? []).some((choice) => typeof choice.delta?.content === 'string' && choice.delta.content.length > 0);
  } catch {
    return false;
  }
}

/**
 * One paced stream read to its end over `dispatcher` (a pool: many streams at once): milliseconds
 * until the first chunk with content, and until the end. A stream with another number of content
 * chunks, or without [DONE], fails the run: a cut stream must not pass for a fast one.
 */
export async function timedPacedStream(
  dispatcher: Dispatcher,
  name: string,
  path: string,
  headers: Record<string, string>,
  body: string,
): Promise<{ firstContentMs: number; totalMs: number }> {
  const started = performance.now();
  const response = await dispatcher.request({ path, method: 'POST', headers, body });
  if (response.statusCode !== 200) throw new Error(`${name}: paced stream HTTP ${response.statusCode}: ${(await response.body.text()).slice(0, 300)}`);
  let firstContentMs = -1;
  let contentChunks = 0;
  let done = false;
  for await (const { data } of readSse(response.body as AsyncIterable<Uint8Array>)) {
    if (data === '[DONE]') {
      done = true;
    } else if (carriesContent(data)) {
      if (firstContentMs < 0) firstContentMs = performance.now() - started;
      contentChunks += 1;
    }
  }
  if (contentChunks !== PACED_CONTENT_CHUNKS) throw new Error(`${name}: a paced stream carried ${contentChunks} content chunks, not ${PACED_CONTENT_CHUNKS}`);
  if (!done) throw new Error(`${name}: a paced stream ended without [DONE]`);
  return { firstContentMs, totalMs: performance.now() - started };
}

/** Runs `once` `count` times, `concurrency` at a time (each worker starts the next as its last ends). */
export async function runConcurrently<T>(count: number, concurrency: number, once: () => Promise<T>): Promise<T[]> {
  const results: T[] = [];
  let started = 0;
  const worker = async () => {
    while (started < count) {
      started += 1;
      results.push(await once());
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, count) }, worker));
  return results;
}
