import type { ChatCompletion, ChatRequestBody, LabelLogprobsRequest } from '../../core/gateway/provider.ts';
import { protocolError, type ErrorContext } from '../http/upstream-errors.ts';
import { labelLogprobsFromTop } from '../label-logprobs.ts';

/** OpenAI's largest `top_logprobs`: the more alternatives listed, the fewer labels fall back to a bound. */
export const TOP_LOGPROBS = 20;

/**
 * The chat request that weighs the labels: one token of output, with its most likely alternatives
 * and their log probabilities. No temperature is sent: log probabilities are the model's own.
 */
export function labelLogprobsBody(request: LabelLogprobsRequest): ChatRequestBody {
  return { model: request.model, messages: request.messages, max_tokens: 1, logprobs: true, top_logprobs: TOP_LOGPROBS };
}

/** `choices[0].logprobs.content[0].top_logprobs`, read into each label's log probability. */
export function labelLogprobsOf(completion: ChatCompletion, labels: readonly string[], errors: ErrorContext): number[] {
  const logprobs = completion.choices[0]?.logprobs as { content?: unknown } | null | undefined;
  const first = Array.isArray(logprobs?.content) ? (logprobs.content[0] as { top_logprobs?: unknown } | undefined) : undefined;
  const top = first?.top_logprobs;
  if (!Array.isArray(top)) throw protocolError(errors, 'upstream answered without log probabilities (does it offer logprobs?)', completion);
  const alternatives = top.filter(
    (item): item is { token: string; logprob: number } => item !== null && typeof item === 'object' && typeof item.token === 'string' && typeof item.logprob === 'number',
  );
  const weighed = labelLogprobsFromTop(alternatives, labels);
  if (!weighed) throw protocolError(errors, `the reply began with none of the answer labels (${labels.join(', ')})`, completion);
  return weighed;
}
