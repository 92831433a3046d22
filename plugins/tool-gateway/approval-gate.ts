/**
 * The seam between a tool call at `/mcp/gateway` and the people who approve it. The call path decides
 * whether a call needs approval (the tool's resolved policy in a governed project) and asks the gate;
 * the gate owns the pending approvals, their decisions, expiry and the wake-up across replicas.
 */

/** One exact call: an approval given for it releases that call (same key, tool and arguments) and no other. */
export interface ToolCallForApproval {
  organizationId: string;
  projectId: string;
  keyId: string;
  toolId: string;
  upstreamId: string;
  /** The name the agent called, as the key sees it (`<slug>__<tool>`). */
  gatewayName: string;
  /** SHA-256 (hex) of the arguments' canonical JSON: the arguments themselves are never stored. */
  argumentsHash: string;
  /** The request id of the MCP call, for the audit trail and the usage row. */
  requestId: string;
}

export type ApprovalOutcome =
  /** Approved (now or before, for this exact call): the call runs, once. */
  | { decision: 'approved'; approvalId: string }
  /** No decision within the wait: the call answers an isError naming the approval, to retry once decided. */
  | { decision: 'pending'; approvalId: string; expiresAt: Date }
  | { decision: 'denied' | 'expired'; approvalId: string; reason: string | null };

export interface ApprovalWait {
  /** How long the call waits for a decision before answering `pending`. */
  waitMs: number;
  /** The agent cancelled or the connection closed: stop waiting, answer `pending`. */
  signal: AbortSignal;
  /** Called periodically while waiting, so the call can send progress notifications to the agent. */
  onWaiting?: (approvalId: string, elapsedMs: number) => Promise<void> | void;
}

export interface ApprovalGate {
  /**
   * Finds the approval for this exact call or creates a pending one, then waits up to `waitMs` for a
   * decision made on any replica. An approval releases its call once: a retry after it ran asks again.
   */
  decide(call: ToolCallForApproval, wait: ApprovalWait): Promise<ApprovalOutcome>;
  /** Pending, unexpired approvals of these projects (for the overview). */
  countPending(organizationId: string, projectIds: readonly string[]): Promise<number>;
}
