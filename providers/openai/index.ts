import { defineProviderType } from '../../core/gateway/provider.ts';
import { openAIConfigSchema } from './config.ts';
import { openAIPlatformInputFacts } from './openai-model-names.ts';
import { OpenAIProvider } from './openai-provider.ts';

export { openAIConfigSchema, type OpenAIConfig } from './config.ts';
export { OpenAIProvider } from './openai-provider.ts';

/** `type: openai` — any OpenAI-compatible API (OpenAI, Azure OpenAI, Groq, Together, vLLM, Ollama, …). */
export const openAIProviderType = defineProviderType({
  type: 'openai',
  configSchema: openAIConfigSchema,
  create: (name, config, context) => new OpenAIProvider(name, config, context),
  // o200k_base or cl100k_base by model family, on OpenAI's own API.
  inputFacts: openAIPlatformInputFacts,
});
