import { z } from 'zod';

/** `plugins.support`: attachment limits and the account assistant's models. */
export const supportConfigSchema = z.strictObject({
  attachments: z
    .strictObject({
      /** Files one message may carry. */
      maxFiles: z.number().int().min(1).max(20).default(5),
      /** The largest file, in bytes (default 10 MiB). */
      maxFileBytes: z
        .number()
        .int()
        .min(1)
        .max(100 * 1024 * 1024)
        .default(10 * 1024 * 1024),
    })
    .default({ maxFiles: 5, maxFileBytes: 10 * 1024 * 1024 }),
  assistant: z
    .strictObject({
      /** The chat model the assistant answers with when the caller names none (a model of the gateway). */
      model: z.string().min(1).default('mock-small'),
      /** The model POST /assistant/images draws with when the caller names none. */
      imageModel: z.string().min(1).default('mock-image'),
      /** Rounds of tool calls before the model must answer in words. */
      maxToolRounds: z.number().int().min(0).max(10).default(4),
      /** A tool's answer is cut to this many characters before the model reads it. */
      maxToolResultCharacters: z.number().int().min(256).max(200_000).default(16_000),
    })
    .default({ model: 'mock-small', imageModel: 'mock-image', maxToolRounds: 4, maxToolResultCharacters: 16_000 }),
});

export type SupportConfig = z.output<typeof supportConfigSchema>;
