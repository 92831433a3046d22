/**
 * Child process: the loopback fake OpenAI upstream the bench talks to, directly and through the
 * gateway. It answers every request with the fake's default reply (JSON, or SSE in one write),
 * and records nothing so its memory stays flat. Started by bench/gateway-overhead.ts.
 */
import { startFakeOpenAIUpstream } from '../test/fakes/fake-openai-upstream.ts';
import { exitWithParent, tellParent } from './ipc.ts';

async function main(): Promise<void> {
  const fake = await startFakeOpenAIUpstream({ record: false });
  exitWithParent(() => fake.close());
  await tellParent({ type: 'ready', url: fake.url });
}

main().catch(async (error: unknown) => {
  await tellParent({ type: 'error', message: `fake upstream failed to start: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}` });
  process.exit(1);
});
