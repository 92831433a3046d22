import { z } from 'zod';
import { MODALITIES, type Modality } from '../../core/gateway/provider.ts';

export const openAIConfigSchema = z.object({
  /** e.g. https://api.openai.com/v1, https://api.groq.com/openai/v1, http://vllm.lan:8000/v1; for Azure the resource URL. */
  baseUrl: z.string().url(),
  apiKey: z.string().min(1).optional(),
  /** Sent with every call (organisation/project headers, proxies' own auth). */
  headers: z.record(z.string(), z.string()).optional(),
  /** Ask for the usage chunk on streams (`stream_options.include_usage`); turn off for servers that reject it. */
  includeStreamUsage: z.boolean().default(true),
  /** For upstreams on the operator's own network (vLLM, Ollama) and loopback fakes in tests. */
  allowPrivateNetwork: z.boolean().default(false),
  /** Azure OpenAI: deployment URLs, `api-version` and the `api-key` header. */
  azure: z.object({ apiVersion: z.string().min(1) }).optional(),
  /**
   * The endpoints this upstream has, by modality (default: all of them, as OpenAI's own API). An
   * OpenAI-compatible server without some (vLLM or Groq without the Responses API, a chat-only
   * proxy) lists what it has, e.g. `[language, embeddings]`: route planning then skips it for the rest.
   */
  offers: z
    .array(z.enum(MODALITIES as [Modality, ...Modality[]]))
    .min(1)
    .default([...MODALITIES]),
});

export type OpenAIConfig = z.output<typeof openAIConfigSchema>;
