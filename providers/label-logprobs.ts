/**
 * Reading label log probabilities out of a reply's first-token alternatives (OpenAI's
 * `choices[0].logprobs.content[0].top_logprobs`), for providers offering `evaluation`
 * (core/gateway/provider.ts). Shared so every provider reads them the same way.
 */

/** What matches a label: the same letters in any case, spaces around them ignored (`" Yes"` is `yes`). */
export function labelKey(token: string): string {
  return token.trim().toLowerCase();
}

/**
 * Each label's log probability among `top` (a token and its log probability, most likely first or
 * not): the tokens spelling the label are added up (log-sum-exp), since `Yes`, `yes` and ` yes` are
 * the same answer. A label none of them spells gets the smallest log probability listed, an upper
 * bound of its own (it ranked below every token listed). Null when no label is listed at all: the
 * reply was not an answer.
 */
export function labelLogprobsFromTop(top: ReadonlyArray<{ token: string; logprob: number }>, labels: readonly string[]): number[] | null {
  const byKey = new Map<string, number[]>();
  let least = 0;
  for (const { token, logprob } of top) {
    if (!Number.isFinite(logprob)) continue;
    least = Math.min(least, logprob);
    const key = labelKey(token);
    const spellings = byKey.get(key);
    if (spellings) spellings.push(logprob);
    else byKey.set(key, [logprob]);
  }
  let listed = false;
  const logprobs = labels.map((label) => {
    const spellings = byKey.get(labelKey(label));
    if (!spellings) return null;
    listed = true;
    return logSumExp(spellings);
  });
  return listed ? logprobs.map((logprob) => logprob ?? least) : null;
}

function logSumExp(values: readonly number[]): number {
  const top = Math.max(...values);
  let sum = 0;
  for (const value of values) sum += Math.exp(value - top);
  return top + Math.log(sum);
}
