import { createHash, randomUUID } from 'node:crypto';
import { Tokens } from '../../../core/kernel/di-tokens.ts';
import type { ApprovalOutcome, ApprovalWait, ToolCallForApproval } from '../../../plugins/tool-gateway/approval-gate.ts';
import { ToolGatewayTokens } from '../../../plugins/tool-gateway/index.ts';
import { createKey, type TapLike, type TestApp } from '../../helpers/app.ts';
import { startFakeMcpServer, tool } from './fake-mcp-server.ts';

export type Json = Record<string, any>;

export async function call(app: TestApp, method: string, url: string, body?: unknown, token?: string) {
  const response = await app.call(method, `/client${url}`, { ...(body !== undefined ? { body } : {}), token });
  return { status: response.statusCode, json: response.json() as Json, raw: response.body };
}

export const gateOf = (app: TestApp) => app.app.svc.container.resolve(ToolGatewayTokens.Approvals);

/** A fresh project with an agent's key and an upstream whose `close_issue` tool is switched on. */
export async function toolProject(t: TapLike, app: TestApp) {
  const slug = `s${randomUUID().slice(0, 8)}`;
  const projectId = (await call(app, 'POST', '/projects', { name: `p-${slug}` })).json.id as string;
  const key = await createKey(app, { name: 'agent', projectId, scopes: ['mcp:read', 'mcp:write'] });
  const mcp = await startFakeMcpServer([tool('close_issue')]);
  t.teardown(() => mcp.close());
  const upstream = await call(app, 'POST', '/mcp/upstreams', { name: 'Tracker', slug, url: `${mcp.url}/mcp`, newTools: 'enabled', projectId });
  if (upstream.status !== 201) throw new Error(upstream.raw);
  const listed = (await call(app, 'GET', `/mcp/tools?upstreamId=${upstream.json.id}`)).json.data as Json[];
  const closeIssue = listed.find((each) => each.name === 'close_issue');
  if (!closeIssue) throw new Error('close_issue was not discovered');
  return { projectId, key, mcp, slug, upstreamId: upstream.json.id as string, toolId: closeIssue.id as string };
}

/** The call of `close_issue` with these arguments by the project's key, as the gateway would hand it to the gate. */
export function callOf(app: TestApp, p: Awaited<ReturnType<typeof toolProject>>, args: Json = { id: 7 }): ToolCallForApproval {
  return {
    organizationId: app.organizationId,
    projectId: p.projectId,
    keyId: p.key.id,
    toolId: p.toolId,
    upstreamId: p.upstreamId,
    gatewayName: `${p.slug}__close_issue`,
    argumentsHash: createHash('sha256').update(JSON.stringify(args)).digest('hex'),
    requestId: `req_${randomUUID().slice(0, 8)}`,
  };
}

export function waiting(waitMs: number, extra: Partial<ApprovalWait> = {}): ApprovalWait {
  return { waitMs, signal: new AbortController().signal, ...extra };
}

/** Asks the gate and resolves once the call waits on a pending approval (its first progress report), with the outcome to come. */
export async function waitingCall(app: TestApp, toolCall: ToolCallForApproval, waitMs = 60_000): Promise<{ approvalId: string; outcome: Promise<ApprovalOutcome> }> {
  let reported!: (id: string) => void;
  const waits = new Promise<string>((resolve) => (reported = resolve));
  const outcome = gateOf(app).decide(toolCall, waiting(waitMs, { onWaiting: (id) => reported(id) }));
  const approvalId = await Promise.race([waits, outcome.then((o) => Promise.reject(new Error(`answered before waiting: ${JSON.stringify(o)}`)))]);
  return { approvalId, outcome };
}

export async function eventsOf(app: TestApp, approvalId: string): Promise<Array<{ type: string; data: Json }>> {
  const database = app.app.svc.container.resolve(Tokens.Database);
  const { rows } = await database.query<{ type: string; data: Json | string }>('SELECT type, data FROM events WHERE subject = $1 ORDER BY occurred_at, type', [approvalId]);
  return rows.map((row) => ({ type: row.type, data: typeof row.data === 'string' ? JSON.parse(row.data) : row.data }));
}
