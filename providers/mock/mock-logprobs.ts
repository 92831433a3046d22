import { MockRandom } from './mock-random.ts';

/** OpenAI's `top_logprobs` entry. */
export interface TopLogprob {
  token: string;
  logprob: number;
  bytes: number[];
}

/** OpenAI's `logprobs.content[]` entry: the chosen token, its log probability and the likeliest alternatives. */
export interface TokenLogprob extends TopLogprob {
  top_logprobs: TopLogprob[];
}

/** Alternatives the mock "considered"; those equal to the chosen token are skipped. */
const ALTERNATIVES = [' the', ' a', ' and', ',', '.', ' mock', ' model', ' of', ' to', ' is', ' it', ' that', ' in', ' you', ' this', ' reply', ' an', ' for', ' on', ' with'];

const bytesOf = (token: string): number[] => Array.from(Buffer.from(token, 'utf8'));

/**
 * Log probabilities for each token of a reply, drawn from the position and token so they are the
 * same every time. They form a distribution: the chosen token is the likeliest (first of
 * `top_logprobs`, as OpenAI lists it) and the alternatives share what probability is left.
 */
export function tokenLogprobs(tokens: readonly string[], topLogprobs: number, offset = 0): TokenLogprob[] {
  return tokens.map((token, position) => {
    const random = new MockRandom('logprob', offset + position, token);
    const chosenProbability = 0.55 + random.next() * 0.45;
    const logprob = round(Math.log(chosenProbability));
    const top: TopLogprob[] = [];
    if (topLogprobs > 0) top.push({ token, logprob, bytes: bytesOf(token) });
    let left = 1 - chosenProbability;
    const start = random.integer(0, ALTERNATIVES.length - 1);
    for (let i = 0; top.length < topLogprobs && i < ALTERNATIVES.length; i++) {
      const alternative = ALTERNATIVES[(start + i) % ALTERNATIVES.length]!;
      if (alternative === token) continue;
      left /= 2;
      top.push({ token: alternative, logprob: round(Math.log(left)), bytes: bytesOf(alternative) });
    }
    return { token, logprob, bytes: bytesOf(token), top_logprobs: top };
  });
}

const round = (value: number): number => Math.round(value * 1e6) / 1e6;
