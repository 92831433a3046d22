import { z } from 'zod';

const MiB = 1024 * 1024;

/**
 * `plugins.apps` settings of the app upkeep routes (README.md "Storage, release commands, fixes,
 * mail, egress"): spread into the apps plugin's config schema.
 */
export const upkeepConfigShape = {
  storage: z
    .strictObject({
      /** The largest file one upload may carry (413 `request_too_large` past it). */
      maxFileBytes: z
        .number()
        .int()
        .min(1)
        .max(1024 * MiB)
        .default(25 * MiB),
      /** All of an app's files together (409 `storage_quota_exceeded` past it). */
      maxAppBytes: z
        .number()
        .int()
        .min(1)
        .default(1024 * MiB),
      /** Files an app may keep. */
      maxObjects: z.number().int().min(1).default(10_000),
    })
    .prefault({}),
  release: z
    .strictObject({
      /** The longest a release command may run before the deploy fails (it is killed). */
      timeoutMs: z.number().int().min(1_000).default(600_000),
    })
    .prefault({}),
  autofix: z
    .strictObject({
      /** The chat model proposing fixes when the caller names none (a model of the gateway). */
      model: z.string().min(1).default('mock-small'),
      /** The build log's last lines the model reads. */
      logLines: z.number().int().min(10).max(2_000).default(200),
      /** Fixes kept per service (the oldest go first). */
      keep: z.number().int().min(1).max(100).default(20),
    })
    .prefault({}),
  egress: z
    .strictObject({
      /** Bytes an app may send through the proxy in 24 hours before it is reported as alerting. */
      alertBytesPerDay: z
        .number()
        .int()
        .min(1)
        .default(10 * 1024 * MiB),
    })
    .prefault({}),
};
