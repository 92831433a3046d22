import { z } from 'zod';

export const anthropicConfigSchema = z.object({
  /** Without `/v1` (the SDKs' convention); one ending in `/v1` is accepted too. */
  baseUrl: z.string().url().default('https://api.anthropic.com'),
  apiKey: z.string().min(1),
  /** The `anthropic-version` header. */
  version: z.string().min(1).default('2023-06-01'),
  /** Sent with every call, e.g. `anthropic-beta`. */
  headers: z.record(z.string(), z.string()).optional(),
  allowPrivateNetwork: z.boolean().default(false),
  /** Anthropic requires max_tokens; used when the request names none. */
  defaultMaxTokens: z.number().int().positive().default(4096),
});

export type AnthropicConfig = z.output<typeof anthropicConfigSchema>;
