import { inputTokenProfile, UNKNOWN_MODEL_IMAGE_TOKENS, type InputTokenProfile, type RouteInputFacts, type Tokenizer } from '../../providers/input-token-bound.ts';
import { OPENAI_MAX_IMAGE_TOKENS, openAIInputFacts } from '../../providers/openai/openai-model-names.ts';
import type { InferenceConfig, ModelConfig } from './inference-config.ts';

type ProviderEntry = InferenceConfig['providers'][string];

const OPENAI_API_HOST = 'api.openai.com';

/**
 * How a model's routes count input, for the reservation bound (providers/input-token-bound.ts):
 * the model's declared `tokenizer`, else what each upstream model name says when the route is
 * OpenAI's own API, else unknown. Names are trusted only there: an Azure deployment is named by
 * its operator, and other OpenAI-compatible servers name their models as they please.
 */
export function modelInputProfile(model: ModelConfig, providers: InferenceConfig['providers']): InputTokenProfile {
  return inputTokenProfile(model.routes.map((route) => routeInputFacts(model.tokenizer, providers[route.provider], route.model)));
}

function routeInputFacts(declared: Tokenizer | undefined, provider: ProviderEntry | undefined, upstreamModel: string): RouteInputFacts {
  const known = provider && isOpenAIPlatform(provider) ? openAIInputFacts(upstreamModel) : undefined;
  const tokenizer = declared ?? known?.tokenizer ?? 'bytes';
  // Declared OpenAI tokenizers without a known name: any OpenAI model may be behind them.
  const maxImageTokens = known?.maxImageTokens ?? (tokenizer === 'bytes' ? UNKNOWN_MODEL_IMAGE_TOKENS : OPENAI_MAX_IMAGE_TOKENS);
  return { tokenizer, maxImageTokens };
}

function isOpenAIPlatform(provider: ProviderEntry): boolean {
  if (provider.type !== 'openai' || provider.package !== undefined || provider['azure'] !== undefined) return false;
  try {
    return new URL(String(provider['baseUrl'])).hostname === OPENAI_API_HOST;
  } catch {
    return false;
  }
}
