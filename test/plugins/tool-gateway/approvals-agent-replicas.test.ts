import { randomUUID } from 'node:crypto';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type { CallToolResult, Progress } from '@modelcontextprotocol/sdk/types.js';
import t from 'tap';
import { generateToken, SESSION_PREFIX } from '../../../core/identity/api-tokens.ts';
import { allPlugins, buildTestApp, realServersConfig, type TapLike, type TestApp } from '../../helpers/app.ts';
import { testClock } from '../../helpers/jobs.ts';
import { listeningBase, mcpClient } from '../../helpers/mcp-client.ts';
import { call, gateOf, toolProject } from './approvals-fixtures.ts';

/**
 * Approvals end to end: an MCP SDK agent on replica A's /mcp/gateway (a real listening server) calls
 * a destructive tool of a real SDK-built upstream in a governed project, and an owner decides on
 * replica B; both replicas share PostgreSQL and Redis. A call waits WAIT_MS at most (real time, as
 * an agent's request is held), and a waiting call re-reads its approval only every ten minutes, so a
 * call released in time was woken by the decision's announcement. Skipped without TEST_PG_URL and
 * TEST_REDIS_URL.
 */
t.setTimeout(300_000);

const TTL = 600_000;
/** Long enough for a decision on B to reach A on a loaded machine; each timeout test waits it out once or twice. */
const WAIT_MS = 6_000;
const servers = realServersConfig();
const clock = testClock(new Date().toISOString());

async function replicas(): Promise<[TestApp, TestApp]> {
  if (!servers) throw new Error('unreachable: skipped without servers');
  t.teardown(() => servers.dropSchema());
  const config = {
    storage: servers.storage,
    secrets: servers.secrets,
    outbound: { allowPrivateNetwork: true },
    bootstrap: { ownerToken: generateToken(SESSION_PREFIX) },
    plugins: {
      ...allPlugins(),
      'tool-gateway': { approvalTtlMs: TTL, approvalWaitMs: WAIT_MS, approvalProgressMs: 100, approvalRecheckMs: 600_000 },
    },
  };
  return [await buildTestApp(t, { config, clock }), await buildTestApp(t, { config, clock })];
}

type Json = Record<string, any>;
const text = (result: unknown) => ((result as CallToolResult).content[0] as { text: string }).text;
/** The approval a waiting call's progress names ("… (approval <id>)"). */
const approvalIn = (progress: Progress) => /approval ([0-9a-f-]{36})/.exec(progress.message ?? '')?.[1];

if (!servers) {
  t.pass('skipped: needs TEST_PG_URL and TEST_REDIS_URL');
} else {
  const [a, b] = await replicas();
  const base = await listeningBase(a);

  /** A governed project (the default) whose agent, on A, is granted the upstream's destructive close_issue. */
  async function agentProject(t: TapLike) {
    const p = await toolProject(t, a);
    const groupId = (await call(a, 'POST', '/mcp/groups', { name: `g-${randomUUID().slice(0, 6)}`, projectId: p.projectId })).json.id as string;
    await call(a, 'PUT', `/mcp/groups/${groupId}/tools`, { toolIds: [p.toolId] });
    const granted = await call(a, 'POST', '/mcp/grants', { groupId, keyId: p.key.id });
    if (granted.status !== 201) throw new Error(granted.raw);
    const agent: Client = await mcpClient(t, base, p.key.key, '/mcp/gateway');
    return { ...p, agent, name: `${p.slug}__close_issue` };
  }

  /**
   * The agent's call, and `decide` run once on the first progress naming the approval (while the
   * call waits); answers the result, every progress seen, and what `decide` answered.
   */
  async function callDeciding<T>(agent: Client, name: string, args: Json, decide?: (approvalId: string) => Promise<T>) {
    const progress: Progress[] = [];
    // Assigned in the callback: typed so that TypeScript does not narrow it to null here.
    let decided = null as Promise<T> | null;
    const result = await agent.callTool({ name, arguments: args }, undefined, {
      onprogress(update) {
        progress.push(update);
        const approvalId = approvalIn(update);
        if (decide && approvalId && !decided) decided = decide(approvalId);
      },
    });
    return { result, progress, decision: decided ? await decided : null };
  }

  t.test("approved on B while the agent's call waits on A: the call completes with the upstream's result", async (t) => {
    const p = await agentProject(t);
    const { result, progress, decision } = await callDeciding(p.agent, p.name, { id: 7 }, (id) => call(b, 'POST', `/mcp/approvals/${id}/approve`, {}));
    t.equal(decision?.status, 200, 'the owner approved on B');
    t.notOk(result.isError, text(result));
    t.same(result.structuredContent, { echoed: { id: 7 } });
    t.ok(progress.length > 0, 'the agent heard that its call waits');
    t.same(p.mcp.calls, [{ name: 'close_issue', arguments: { id: 7 } }], 'the upstream ran it once');
  });

  t.test('a wait that times out names the approval; approved on B, the retried call runs once, and another retry asks anew', async (t) => {
    const p = await agentProject(t);
    const first = await p.agent.callTool({ name: p.name, arguments: { id: 8 } });
    t.equal(first.isError, true);
    const approvalId = /Approval ([0-9a-f-]{36}) is pending until /.exec(text(first))?.[1];
    t.ok(approvalId, text(first));
    t.same(p.mcp.calls, [], 'not run while pending');
    t.equal((await call(b, 'POST', `/mcp/approvals/${approvalId}/approve`, {})).status, 200);
    const retried = await p.agent.callTool({ name: p.name, arguments: { id: 8 } });
    t.notOk(retried.isError, text(retried));
    t.same(retried.structuredContent, { echoed: { id: 8 } });
    const again = await p.agent.callTool({ name: p.name, arguments: { id: 8 } });
    t.equal(again.isError, true);
    const next = /Approval ([0-9a-f-]{36}) is pending until /.exec(text(again))?.[1];
    t.ok(next && next !== approvalId, 'a new approval, the first one used');
    t.equal(p.mcp.calls.length, 1, 'the approved call ran exactly once');
  });

  t.test('denied on B while the call waits: isError naming the approval and the reason, nothing run', async (t) => {
    const p = await agentProject(t);
    let approvalId = '';
    const { result, decision } = await callDeciding(p.agent, p.name, { id: 9 }, (id) => {
      approvalId = id;
      return call(b, 'POST', `/mcp/approvals/${id}/deny`, { reason: 'Not that issue' });
    });
    t.equal(decision?.status, 200);
    t.equal(result.isError, true);
    t.equal(text(result), `Approval ${approvalId} of this call of ${p.name} was denied: Not that issue. Do not retry it unchanged.`);
    t.same(p.mcp.calls, []);
  });

  t.test("expired by B's sweep while the call waits: isError saying it expired, nothing run", async (t) => {
    const p = await agentProject(t);
    let approvalId = '';
    const { result, decision } = await callDeciding(p.agent, p.name, { id: 10 }, async (id) => {
      approvalId = id;
      clock.advance(TTL);
      return gateOf(b).expireDue();
    });
    t.ok((decision ?? 0) >= 1, 'the sweep lapsed it');
    t.equal(result.isError, true);
    t.match(text(result), `Approval ${approvalId} of this call of ${p.name} expired before anyone decided`);
    t.same(p.mcp.calls, []);
  });
}
