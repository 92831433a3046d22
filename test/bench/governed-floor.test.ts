import { type ChildProcess, fork } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI from 'openai';
import t, { type Test } from 'tap';
import { startFakeOpenAIUpstream } from '../fakes/fake-openai-upstream.ts';

/**
 * The governed floor is a yardstick (bench/stream-cost.ts --governed-floor): it is only worth
 * reading beside the gateway while it answers what the gateway answers and does the work it
 * claims, so an SDK client checks both here.
 */
async function startFloor(t: Test, upstreamUrl: string): Promise<{ url: string; child: ChildProcess }> {
  const child = fork(join(import.meta.dirname, '../../bench/governed-floor-process.ts'), {
    execArgv: ['--import', 'tsx'],
    env: { ...process.env, BENCH_UPSTREAM_URL: upstreamUrl },
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  t.teardown(() => {
    if (child.exitCode === null) child.kill('SIGTERM');
  });
  const ready = await new Promise<{ type: string; url?: string; message?: string }>((resolve) => child.once('message', resolve));
  if (ready.type !== 'ready' || !ready.url) throw new Error(`governed floor: ${ready.message}`);
  return { url: ready.url, child };
}

const client = (url: string, apiKey = 'sk-bench-upstream') => new OpenAI({ baseURL: `${url}/v1`, apiKey, maxRetries: 0 });
const journalOf = (child: ChildProcess) =>
  readFileSync(join(tmpdir(), `governed-floor-${child.pid}.journal`), 'utf8')
    .trim()
    .split('\n');

t.test('a JSON call comes back under the asked model, journaled before and after the upstream saw it', async (t) => {
  const fake = await startFakeOpenAIUpstream();
  t.teardown(() => fake.close());
  const { url, child } = await startFloor(t, fake.url);
  const completion = await client(url).chat.completions.create({ model: 'bench-model', messages: [{ role: 'user', content: 'hi' }] });
  t.equal(completion.model, 'bench-model');
  t.ok(completion.usage?.total_tokens, 'the usage it priced is passed on');
  t.equal(fake.requests.at(-1)?.body?.model, 'gpt-4o-mini', 'the upstream got its own model name');
  t.same(
    journalOf(child).map((line) => JSON.parse(line)[0]),
    ['admitted', 'row'],
  );
});

t.test('a stream arrives chunk by chunk under the asked model, with its usage chunk', async (t) => {
  const fake = await startFakeOpenAIUpstream({ defaultReply: { content: 'one two three four five six' } });
  t.teardown(() => fake.close());
  const { url } = await startFloor(t, fake.url);
  const stream = await client(url).chat.completions.create({
    model: 'bench-model',
    messages: [{ role: 'user', content: 'hi' }],
    stream: true,
    stream_options: { include_usage: true },
  });
  let text = '';
  let usage = 0;
  for await (const chunk of stream) {
    t.equal(chunk.model, 'bench-model');
    text += chunk.choices[0]?.delta.content ?? '';
    usage += chunk.usage?.total_tokens ?? 0;
  }
  t.equal(text, 'one two three four five six');
  t.ok(usage > 0, 'the usage chunk came through');
});

t.test('an unknown key is refused before the upstream is called', async (t) => {
  const fake = await startFakeOpenAIUpstream();
  t.teardown(() => fake.close());
  const { url } = await startFloor(t, fake.url);
  const refused = await client(url, 'sk-someone-else')
    .chat.completions.create({ model: 'bench-model', messages: [{ role: 'user', content: 'hi' }] })
    .catch((error: unknown) => error);
  t.equal((refused as { status?: number }).status, 400);
  t.equal(fake.requests.length, 0);
});
