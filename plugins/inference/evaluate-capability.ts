import { cancellationOf, GatewayCallOptions } from '../../core/gateway/call-options.ts';
import { CallSignal, onCancel } from '../../core/gateway/call-signal.ts';
import { offers, UpstreamError, type CallOptions, type EvaluationProvider, type Usage } from '../../core/gateway/provider.ts';
import { chatInputTokenBound } from '../../providers/input-token-bound.ts';
import { estimateChatInputTokens } from '../../providers/token-estimate.ts';
import type { CallEstimate, GatewayCapability } from './capability.ts';
import { calibratedProbabilities, calibrationParameters } from './evaluate-calibration.ts';
import { questionPrompts, type QuestionPrompt } from './evaluate-prompts.ts';
import { parseEvaluateRequest, type EvaluateQuestion, type EvaluateRequest } from './evaluate-request.ts';
import type { CatalogueModel, ModelCatalogue } from './model-catalogue.ts';
import type { ProviderRegistry } from './provider-registry.ts';
import type { RouteCandidate } from './route-planner.ts';
import { unsupportedModel } from './unsupported-model.ts';
// Catalogues the codes this module answers with (core/kernel/error-catalogue.ts).
import './inference-errors.ts';

/**
 * Upstream calls of one evaluation in flight at once, after the first: the first goes alone so the
 * shared prefix (instructions and state) is in the upstream's prompt cache before the rest read it.
 */
export const EVALUATE_CONCURRENCY = 8;

/** What one attempt on a route returns: each question's label log probabilities, in request order, and the usage summed. */
export interface EvaluationResult {
  logprobs: number[][];
  usage: Usage;
}

export type EvaluateAnswer = { probability: number } | { selected: string; probabilities: Record<string, number> } | { value: number; probabilities: Record<string, number> };

/**
 * `POST /v1/evaluate`: one shared `state`, typed questions, a calibrated answer per question key
 * (plugins/inference/README.md, "Evaluate"). One short call per question on the same route, so a
 * failure of any of them fails the attempt over to the next route as a whole. Billed on input
 * tokens only: the answer's usage counts no output (each call's one output token is not billed).
 */
export function evaluateCapability(catalogue: ModelCatalogue, providers: ProviderRegistry): GatewayCapability<'evaluation', EvaluateRequest, EvaluationResult> {
  const servesEvaluation = (model: CatalogueModel) =>
    model.evaluation !== undefined &&
    model.routes.some((route) => {
      const provider = providers.get(route.provider);
      return provider !== undefined && offers(provider, 'evaluation');
    });
  return {
    endpoint: '/v1/evaluate',
    modality: 'evaluation',
    parse: parseEvaluateRequest,
    modelOf: (body) => body.model,
    check(_body, model, credential) {
      if (!servesEvaluation(model)) throw unsupportedModel(model, { catalogue, credential, serves: servesEvaluation, does: 'answer evaluations (it is not an evaluation model)' });
    },
    mapInputTexts: mapEvaluateInputTexts,
    estimate(body, model) {
      const prompts = questionPrompts(body);
      const counts = prompts.map((prompt) => chatInputTokenBound({ messages: prompt.messages }, model.inputProfile));
      // A number at once, unless a long state is being counted in slices.
      if (counts.every((count) => typeof count === 'number')) return evaluateEstimate(prompts, model, sum(counts as number[]));
      return Promise.all(counts).then((numbers) => evaluateEstimate(prompts, model, sum(numbers)));
    },
    attempt: (candidate, body, options) => askQuestions(candidate, questionPrompts(body), options),
    answer(result, body, model) {
      const parameters = calibrationParameters(model.evaluation!.calibration);
      const questions = Object.entries(body.questions);
      const answers = questions.map(([key, question], index) => [key, answerOf(question, calibratedProbabilities(result.logprobs[index]!, parameters, question.type === 'boolean'))]);
      const { inputTokens, cachedInputTokens } = result.usage;
      return {
        usage: result.usage,
        body: {
          object: 'evaluation',
          model: model.id,
          // fromEntries: a question key or option named `__proto__` stays a key.
          answers: Object.fromEntries(answers),
          usage: { prompt_tokens: inputTokens, completion_tokens: 0, total_tokens: inputTokens, prompt_tokens_details: { cached_tokens: cachedInputTokens } },
        },
      };
    },
  };
}

function evaluateEstimate(prompts: readonly QuestionPrompt[], model: CatalogueModel, inputTokens: number): CallEstimate {
  return {
    inputTokens,
    // Nothing is billed for output, so nothing is reserved for it.
    maxOutputTokens: 0,
    // What a call cut off by a crash is billed for: the exact count where the tokenizer is known, else the local estimate.
    countedInputTokens: model.inputProfile.tokenizers.includes('bytes') ? sum(prompts.map((prompt) => estimateChatInputTokens({ messages: prompt.messages }))) : inputTokens,
  };
}

const sum = (values: readonly number[]) => values.reduce((total, value) => total + value, 0);

/**
 * Every question on one route: the first alone, then the rest EVALUATE_CONCURRENCY at a time.
 * The calls share a signal of their own, so the first failure stops the others before the
 * attempt fails over (and the client going away stops them all).
 */
async function askQuestions(candidate: RouteCandidate<'evaluation'>, prompts: readonly QuestionPrompt[], options: CallOptions): Promise<EvaluationResult> {
  const parent = cancellationOf(options);
  const group = new CallSignal();
  if (parent.aborted) group.abort(parent.reason);
  const stopForwarding = onCancel(parent, () => group.abort(parent.reason));
  const callOptions = new GatewayCallOptions(group, options.requestId, options.traceHeaders);
  const api: EvaluationProvider = candidate.api;
  const ask = async (prompt: QuestionPrompt) => {
    const result = await api.labelLogprobs({ model: candidate.upstreamModel, messages: prompt.messages, labels: prompt.labels }, callOptions);
    // A provider's answer is read as one number per label, in order: anything else could not be renormalised.
    if (result.logprobs.length !== prompt.labels.length || !result.logprobs.every((logprob) => typeof logprob === 'number' && !Number.isNaN(logprob))) {
      throw new UpstreamError('protocol', `${candidate.provider.name}: answered ${result.logprobs.length} log probabilities for ${prompt.labels.length} labels`);
    }
    return result;
  };
  try {
    const results = [await ask(prompts[0]!)];
    let next = 1;
    const worker = async () => {
      while (next < prompts.length) {
        const index = next++;
        results[index] = await ask(prompts[index]!);
      }
    };
    await Promise.all(Array.from({ length: Math.min(EVALUATE_CONCURRENCY, prompts.length - 1) }, worker)).catch((error: unknown) => {
      group.abort(error);
      throw error;
    });
    return { logprobs: results.map((result) => result.logprobs), usage: billedUsage(results.map((result) => result.usage)) };
  } finally {
    stopForwarding();
  }
}

/** The calls' usage added up, with no output: an evaluation is billed on its input only. */
function billedUsage(usages: readonly Usage[]): Usage {
  return {
    inputTokens: sum(usages.map((usage) => usage.inputTokens)),
    cachedInputTokens: sum(usages.map((usage) => usage.cachedInputTokens)),
    cacheWriteTokens: sum(usages.map((usage) => usage.cacheWriteTokens)),
    outputTokens: 0,
    reasoningTokens: 0,
    estimated: usages.some((usage) => usage.estimated),
  };
}

/** One answer from the calibrated probability of each label, in the question's label order. */
export function answerOf(question: EvaluateQuestion, probabilities: readonly number[]): EvaluateAnswer {
  if (question.type === 'boolean') return { probability: probabilities[0]! };
  if (question.type === 'choice') {
    // The likeliest option; of equals, the first listed.
    const best = probabilities.reduce((top, p, index) => (p > probabilities[top]! ? index : top), 0);
    return { selected: question.options[best]!, probabilities: Object.fromEntries(question.options.map((option, index) => [option, probabilities[index]!])) };
  }
  // The expected rung: each rung weighted by its probability.
  const value = question.rungs.reduce((total, rung, index) => total + rung * probabilities[index]!, 0);
  return { value, probabilities: Object.fromEntries(question.rungs.map((rung, index) => [String(rung), probabilities[index]!])) };
}

/** The state (a string, or every string inside an object), each question's text and each option: what data guardrails read. */
export function mapEvaluateInputTexts(body: EvaluateRequest, map: (text: string) => string): EvaluateRequest {
  const state = mapStrings(body.state, map) as EvaluateRequest['state'];
  let changed = state !== body.state;
  const questions = Object.entries(body.questions).map(([key, question]): [string, EvaluateQuestion] => {
    const text = map(question.question);
    if (question.type === 'choice') {
      const options = mapStrings(question.options, map) as string[];
      if (text === question.question && options === question.options) return [key, question];
      changed = true;
      return [key, { ...question, question: text, options }];
    }
    if (text === question.question) return [key, question];
    changed = true;
    return [key, { ...question, question: text }];
  });
  return changed ? { ...body, state, questions: Object.fromEntries(questions) } : body;
}

/** The value with each string inside it mapped; the value itself where nothing changed. */
function mapStrings(value: unknown, map: (text: string) => string): unknown {
  if (typeof value === 'string') return map(value);
  if (Array.isArray(value)) {
    const mapped = value.map((item) => mapStrings(item, map));
    return mapped.some((item, index) => item !== value[index]) ? mapped : value;
  }
  if (value !== null && typeof value === 'object') {
    const entries = Object.entries(value).map(([key, item]) => [key, mapStrings(item, map)] as const);
    return entries.some(([key, item]) => item !== (value as Record<string, unknown>)[key]) ? Object.fromEntries(entries) : value;
  }
  return value;
}
