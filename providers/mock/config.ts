import { z } from 'zod';

export const mockConfigSchema = z.object({
  /** Wait before answering, like a model's time to first token. */
  latencyMs: z.number().int().min(0).default(0),
  /** Wait between streamed chunks. */
  chunkDelayMs: z.number().int().min(0).default(0),
  /**
   * Length of embedding vectors when the request does not ask for `dimensions`. 64 keeps bodies
   * small for tests and benchmarks while still telling inputs apart.
   */
  embeddingDimensions: z.number().int().min(1).max(8192).default(64),
});

export type MockConfig = z.output<typeof mockConfigSchema>;
