/**
 * Child process for bench/stream-cost.ts: the loopback fake OpenAI upstream, answering chat with a
 * reply long enough for STREAM_COST_CHUNKS chunks (the role chunk, content chunks of two words, the
 * finish chunk; the usage chunk comes on top when asked for), each written on its own and followed
 * by a STREAM_COST_CHUNK_DELAY_MS pause, as a model paces its tokens. JSON calls get the same text.
 */
import { startFakeOpenAIUpstream } from '../test/fakes/fake-openai-upstream.ts';
import { exitWithParent, tellParent } from './ipc.ts';

/** The fake streams two words per content chunk; the role and finish chunks frame them. */
function replyOfChunks(chunks: number): string {
  const words = Math.max(1, chunks - 2) * 2;
  return Array.from({ length: words }, (_, index) => `word${index}`).join(' ');
}

async function main(): Promise<void> {
  const chunks = Number(process.env.STREAM_COST_CHUNKS ?? 20);
  const chunkDelayMs = Number(process.env.STREAM_COST_CHUNK_DELAY_MS ?? 5);
  const defaultReply = { content: replyOfChunks(chunks), chunkDelayMs };
  const fake = await startFakeOpenAIUpstream({ record: false, defaultReply });
  exitWithParent(() => fake.close());
  await tellParent({ type: 'ready', url: fake.url });
}

main().catch(async (error: unknown) => {
  const message = `fake upstream failed to start: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`;
  await tellParent({ type: 'error', message });
  process.exit(1);
});
