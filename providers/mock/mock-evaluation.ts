import type { LabelLogprobsRequest, LabelLogprobsResult } from '../../core/gateway/provider.ts';
import { estimateChatInputTokens } from '../token-estimate.ts';
import { MockRandom } from './mock-random.ts';

/**
 * The mock's answer-label log probabilities: each label's weight drawn from a hash of the upstream
 * model, the prompt and the label, so one question always gets the same distribution and another
 * question (or another label set) a different one. The labels share most but not all of the
 * probability (between 0.80 and 0.99), as a real model's first token leaves a little to other
 * tokens, so the gateway's renormalisation is exercised too.
 */
export function mockLabelLogprobs(request: LabelLogprobsRequest): LabelLogprobsResult {
  const prompt = [request.model, request.messages];
  // Weights spread over e^0..e^4, so some answers are confident and some are not.
  const weights = request.labels.map((label) => Math.exp(4 * new MockRandom('label', prompt, label).next()));
  const total = weights.reduce((sum, weight) => sum + weight, 0);
  const labelsShare = 0.8 + 0.19 * new MockRandom('label-share', prompt).next();
  return {
    logprobs: weights.map((weight) => round(Math.log((labelsShare * weight) / total))),
    // One token out, as a `max_tokens: 1` call reports; the input is the mock's own exact count.
    usage: { inputTokens: estimateChatInputTokens(request), cachedInputTokens: 0, cacheWriteTokens: 0, outputTokens: 1, reasoningTokens: 0, estimated: false },
  };
}

const round = (value: number): number => Math.round(value * 1e6) / 1e6;
