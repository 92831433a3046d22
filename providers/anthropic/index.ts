import { defineProviderType } from '../../core/gateway/provider.ts';
import { anthropicConfigSchema } from './config.ts';
import { AnthropicProvider } from './anthropic-provider.ts';

export { anthropicConfigSchema, type AnthropicConfig } from './config.ts';
export { AnthropicProvider } from './anthropic-provider.ts';

/** `type: anthropic` — the Messages API, spoken to as chat completions. */
export const anthropicProviderType = defineProviderType({
  type: 'anthropic',
  configSchema: anthropicConfigSchema,
  create: (name, config, context) => new AnthropicProvider(name, config, context),
});
