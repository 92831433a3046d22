/**
 * What counting a chat request's input for its reservation costs on the hot path
 * (providers/input-token-bound.ts), per tokenizer, for the benchmark's own request and for longer
 * prompts, in one process with the tables loaded.
 *
 *   npx tsx bench/input-token-count.ts [rounds]     (default 15)
 *
 * Prints, per case, the best and the median over the rounds of the mean µs per count (each round
 * counts for about 50 ms); the best is the figure least disturbed by other work on a shared machine.
 */
import { chatInputTokenBound, inputTokenProfile, loadEncoding, type ChatInput, type InputTokenProfile } from '../providers/input-token-bound.ts';

const rounds = Number(process.argv[2] ?? 15);

/** bench/gateway-overhead.ts's CHAT_BODY: a system prompt and one user turn. */
const benchBody: ChatInput = {
  messages: [
    { role: 'system', content: 'You are a concise assistant for a developer tools company. Answer in at most two sentences.' },
    { role: 'user', content: 'What is the difference between a process and a thread? Give one example of when to use each.' },
  ],
  max_tokens: 128,
};
const paragraph = 'The quick brown fox jumps over the lazy dog while the committee reviews the quarterly budget and the action items. ';
const withText = (bytes: number): ChatInput => ({ messages: [{ role: 'user', content: paragraph.repeat(Math.ceil(bytes / paragraph.length)).slice(0, bytes) }] });
/** A varying suffix, so no count can be remembered across calls (a new prompt every call). */
const varied = (body: ChatInput, i: number): ChatInput => ({ ...body, messages: [...body.messages, { role: 'user', content: `request ${i}` }] });

const profiles: Record<string, InputTokenProfile> = {
  bytes: inputTokenProfile([{ tokenizer: 'bytes', maxImageTokens: 0 }]),
  mock: inputTokenProfile([{ tokenizer: 'mock', maxImageTokens: 0 }]),
  o200k_base: inputTokenProfile([{ tokenizer: 'o200k_base', maxImageTokens: 0 }]),
  cl100k_base: inputTokenProfile([{ tokenizer: 'cl100k_base', maxImageTokens: 0 }]),
};
const bodies: Record<string, ChatInput> = { 'bench request (190 B)': benchBody, '1 KiB prompt': withText(1024), '8 KiB prompt': withText(8 * 1024) };

await Promise.all([loadEncoding('o200k_base'), loadEncoding('cl100k_base')]);

function measure(body: ChatInput, profile: InputTokenProfile): { best: number; median: number } {
  const means: number[] = [];
  let sink = 0;
  for (let round = 0; round < rounds; round += 1) {
    const started = performance.now();
    let calls = 0;
    while (performance.now() - started < 50) {
      const counted = chatInputTokenBound(varied(body, calls), profile);
      if (typeof counted !== 'number') throw new Error('these prompts are short enough to count at once');
      sink += counted;
      calls += 1;
    }
    means.push(((performance.now() - started) * 1000) / calls);
  }
  if (sink < 0) console.log(sink);
  means.sort((a, b) => a - b);
  return { best: means[0]!, median: means[Math.floor(means.length / 2)]! };
}

for (const [bodyName, body] of Object.entries(bodies)) {
  for (const [profileName, profile] of Object.entries(profiles)) {
    const { best, median } = measure(body, profile);
    console.log(
      `${bodyName.padEnd(24)} ${profileName.padEnd(12)} ${best.toFixed(2).padStart(8)} µs best  ${median.toFixed(2).padStart(8)} µs median  (${chatInputTokenBound(body, profile)} tokens)`,
    );
  }
}
