/**
 * Child process: the loopback fake OpenAI upstream the bench talks to, directly and through the
 * gateway. It answers every request with the fake's default reply (JSON, or SSE in one write),
 * and records nothing so its memory stays flat. Started by bench/gateway-overhead.ts.
 *
 * Responses get a longer reply than chat's default: a two-sentence answer streams as about twenty
 * `response.output_text.delta` events, the sequence a real short answer has. Chat keeps the
 * fake's default, so its figures stay comparable with earlier runs. The paced-stream section asks
 * for its model by name (bench/paced-streams.ts): twenty content chunks paced by this process's timers.
 */
import { startFakeOpenAIUpstream } from '../test/fakes/fake-openai-upstream.ts';
import { exitWithParent, tellParent } from './ipc.ts';
import { PACED_MODEL, PACED_REPLY } from './paced-streams.ts';

/** Twenty words: twenty text deltas, one per word, as the fake streams a Responses answer. */
const RESPONSES_REPLY = {
  content: "A process has its own memory, while threads share one process's memory; use processes for isolation, threads for cheap concurrency.",
  usage: { prompt_tokens: 52, completion_tokens: 24 },
};

async function main(): Promise<void> {
  const fake = await startFakeOpenAIUpstream({
    record: false,
    defaultReplyByPath: { '/responses': RESPONSES_REPLY },
    defaultReplyByModel: { [PACED_MODEL]: PACED_REPLY },
  });
  exitWithParent(() => fake.close());
  await tellParent({ type: 'ready', url: fake.url });
}

main().catch(async (error: unknown) => {
  await tellParent({ type: 'error', message: `fake upstream failed to start: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}` });
  process.exit(1);
});
