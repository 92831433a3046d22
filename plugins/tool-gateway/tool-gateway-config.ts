import { z } from 'zod';

/**
 * `plugins.tool-gateway`. Where customers' MCP servers may be is not set here: the kernel's outbound
 * client decides (`outbound.allowPrivateNetwork`), for tool servers as for every customer URL.
 */
export const toolGatewayConfigSchema = z.strictObject({
  /**
   * Whether upstreams may use the `demo` transport: the service's own demo tools, served in this
   * process, so a fresh install shows the gateway without a tool server of its own. Off unless set.
   */
  demoUpstream: z.boolean().default(false),
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
  /** The most bytes an upstream's answer to one tools/call may carry (its progress included); more fails the call. */
  maxCallAnswerBytes: z
    .number()
    .int()
    .min(1_024)
    .default(4 * 1024 * 1024),
  /** A tool call's MCP session to an upstream is kept open this long after its last call, for the next. */
  sessionIdleMs: z.number().int().min(1_000).max(3_600_000).default(60_000),
  /** MCP sessions to upstreams one process keeps open at most (the least recently used idle one closes first). */
  maxUpstreamSessions: z.number().int().min(1).max(100_000).default(512),
  /** How long a pending approval waits for a person; an approved one, for its call to be retried. */
  approvalTtlMs: z.number().int().min(10_000).max(604_800_000).default(600_000),
  /** How long a call needing approval waits for the decision before it answers "pending" (under MCP clients' usual request timeouts). */
  approvalWaitMs: z.number().int().min(0).max(600_000).default(25_000),
  /** How often a waiting call sends the agent a progress notification. */
  approvalProgressMs: z.number().int().min(100).max(60_000).default(5_000),
  /** How often a waiting call reads its approval again, should the wake-up from another replica be lost. */
  approvalRecheckMs: z.number().int().min(50).max(600_000).default(2_000),
  /** How often one replica lapses approvals past their expiry (each an mcp.approval.expired event). */
  approvalSweepMs: z.number().int().min(1_000).max(3_600_000).default(15_000),
});

export type ToolGatewayConfig = z.output<typeof toolGatewayConfigSchema>;
