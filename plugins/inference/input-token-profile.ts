import type { RouteInputFacts } from '../../core/gateway/provider.ts';
import { builtInProviderTypes } from '../../providers/index.ts';
import { inputTokenProfile, UNKNOWN_MODEL_IMAGE_TOKENS, type InputTokenProfile, type Tokenizer } from '../../providers/input-token-bound.ts';
import { OPENAI_MAX_IMAGE_TOKENS } from '../../providers/openai/openai-model-names.ts';
import type { InferenceConfig, ModelConfig } from './inference-config.ts';

type ProviderEntry = InferenceConfig['providers'][string];

/**
 * How a model's routes count input, for the reservation bound (providers/input-token-bound.ts):
 * the model's declared `tokenizer`, else what each route's provider type says of its upstream
 * model (`inputFacts`: the `openai` type by model family on OpenAI's own API, the `mock` its own
 * count), else unknown. A provider from a package is loaded only at start, after this is worked
 * out, so its routes count as unknown unless the model declares a tokenizer.
 */
export function modelInputProfile(model: ModelConfig, providers: InferenceConfig['providers']): InputTokenProfile {
  return inputTokenProfile(model.routes.map((route) => routeInputFacts(model.tokenizer, providers[route.provider], route.model)));
}

function routeInputFacts(declared: Tokenizer | undefined, provider: ProviderEntry | undefined, upstreamModel: string): RouteInputFacts {
  const type = provider && provider.package === undefined ? builtInProviderTypes.get(provider.type ?? '') : undefined;
  const known = provider ? type?.inputFacts?.(upstreamModel, provider) : undefined;
  const tokenizer = declared ?? known?.tokenizer ?? 'bytes';
  // Declared OpenAI tokenizers without a known name: any OpenAI model may be behind them.
  const maxImageTokens = known?.maxImageTokens ?? (tokenizer === 'bytes' ? UNKNOWN_MODEL_IMAGE_TOKENS : OPENAI_MAX_IMAGE_TOKENS);
  return { tokenizer, maxImageTokens };
}
