import { z } from 'zod';

/** OpenAI's batch input limit: 200 MB. */
const DEFAULT_MAX_FILE_BYTES = 200 * 1024 * 1024;

/** `plugins.files`: how large a file may be, and how many requests a batch file may hold. */
export const filesConfigSchema = z.strictObject({
  /**
   * The largest file, of any purpose, in bytes (default 200 MiB, OpenAI's batch input limit). Over
   * it: 413 `request_too_large`, and nothing is kept. The whole upload may be 1 MiB more, for its fields.
   */
  maxFileBytes: z
    .number()
    .int()
    .min(1024)
    .max(2 * 1024 * 1024 * 1024)
    .default(DEFAULT_MAX_FILE_BYTES),
  /** The most requests (lines) a `batch` file may hold (default 50,000, as OpenAI's). */
  maxBatchRequests: z.number().int().min(1).max(1_000_000).default(50_000),
});

export type FilesConfig = z.output<typeof filesConfigSchema>;
