import { z } from 'zod';

/**
 * `plugins.tool-gateway`. Where customers' MCP servers may be is not set here: the kernel's outbound
 * client decides (`outbound.allowPrivateNetwork`), for tool servers as for every customer URL.
 */
export const toolGatewayConfigSchema = z.strictObject({
  /** How often each upstream's tools are listed again, besides at create and on `POST /upstreams/{id}/refresh`. */
  refreshIntervalMs: z.number().int().min(10_000).max(86_400_000).default(300_000),
  /** How often one replica looks for upstreams due a refresh and queues one job for each. */
  refreshSweepMs: z.number().int().min(1_000).max(3_600_000).default(60_000),
  /** Upstreams refreshed at the same time by one process. */
  refreshConcurrency: z.number().int().min(1).max(64).default(4),
  maxUpstreamsPerOrganization: z.number().int().min(1).max(10_000).default(50),
  /** A server listing more tools than this is refused (its tools are kept as they were). */
  maxToolsPerUpstream: z.number().int().min(1).max(10_000).default(1_000),
  /** The most `tools/list` pages followed in one discovery. */
  maxListPages: z.number().int().min(1).max(1_000).default(50),
  /** An OAuth upstream's access token is refreshed when it expires within this. */
  oauthRefreshMarginMs: z.number().int().min(0).max(3_600_000).default(60_000),
  /** How long a started OAuth sign-in waits for its callback. */
  oauthSignInTtlMs: z.number().int().min(60_000).max(3_600_000).default(600_000),
  /** The most bytes one answer of an upstream may carry during discovery. */
  maxAnswerBytes: z
    .number()
    .int()
    .min(1_024)
    .default(8 * 1024 * 1024),
});

export type ToolGatewayConfig = z.output<typeof toolGatewayConfigSchema>;
