import { defineProviderType } from '../../core/gateway/provider.ts';
import { ESTIMATED_IMAGE_TOKENS } from '../token-estimate.ts';
import { mockConfigSchema } from './config.ts';
import { MockProvider } from './mock-provider.ts';

export { mockConfigSchema, type MockConfig } from './config.ts';
export { MockProvider } from './mock-provider.ts';

/** `type: mock` — the offline development provider (see MockProvider). */
export const mockProviderType = defineProviderType({
  type: 'mock',
  configSchema: mockConfigSchema,
  create: (name, config) => new MockProvider(name, config),
  // Its usage is its own count (providers/token-estimate.ts), so a reservation can be exactly it.
  inputFacts: () => ({ tokenizer: 'mock', maxImageTokens: ESTIMATED_IMAGE_TOKENS }),
});
