import { randomUUID } from 'node:crypto';
import t from 'tap';
import { createOrganizationWithOwner, issueSession } from '../../../core/identity/identity-admin.ts';
import { Tokens } from '../../../core/kernel/di-tokens.ts';
import { ApprovalStore, POLICY_CHANGED } from '../../../plugins/tool-gateway/approval-store.ts';
import { addPerson, allPlugins, buildTestApp, createKey } from '../../helpers/app.ts';
import { testClock } from '../../helpers/jobs.ts';
import { call as callAs, callOf, eventsOf, gateOf, type Json, toolProject, waiting, waitingCall } from './approvals-fixtures.ts';
import { tool } from './fake-mcp-server.ts';

t.setTimeout(180_000);

const TTL = 600_000;
const clock = testClock(new Date().toISOString());
const app = await buildTestApp(t, {
  clock,
  config: { outbound: { allowPrivateNetwork: true } },
  // Progress reported soon (a call is known to wait once it reports), and a re-read often enough to find a decision written without a wake-up.
  plugins: { ...allPlugins(), 'tool-gateway': { approvalTtlMs: TTL, approvalProgressMs: 100, approvalRecheckMs: 50 } },
});
const call = (method: string, url: string, body?: unknown, token?: string) => callAs(app, method, url, body, token);
const gate = gateOf(app);
const store = new ApprovalStore(app.app.svc.container.resolve(Tokens.Database));

t.test('a call needing approval creates one pending approval and answers pending after the wait', async (t) => {
  const p = await toolProject(t, app);
  const toolCall = callOf(app, p);
  const outcome = await gate.decide(toolCall, waiting(30));
  t.match(outcome, { decision: 'pending', approvalId: String, expiresAt: new Date(clock().getTime() + TTL) });
  if (outcome.decision !== 'pending') return;
  const listed = (await call('GET', `/mcp/approvals?keyId=${p.key.id}`)).json.data as Json[];
  t.equal(listed.length, 1);
  t.match(listed[0], {
    object: 'mcp_approval',
    id: outcome.approvalId,
    status: 'pending',
    projectId: p.projectId,
    keyId: p.key.id,
    tool: { id: p.toolId, gatewayName: toolCall.gatewayName },
    upstreamId: p.upstreamId,
    argumentsHash: toolCall.argumentsHash,
    decidedAt: null,
    decidedBy: null,
    usedAt: null,
  });
  const events = await eventsOf(app, outcome.approvalId);
  t.same(
    events.map((each) => each.type),
    ['mcp.approval.requested'],
  );
  t.same(events[0]?.data, {
    approvalId: outcome.approvalId,
    projectId: p.projectId,
    keyId: p.key.id,
    toolId: p.toolId,
    upstreamId: p.upstreamId,
    gatewayName: toolCall.gatewayName,
    argumentsHash: toolCall.argumentsHash,
    requestId: toolCall.requestId,
    expiresAt: outcome.expiresAt.toISOString(),
  });
  t.notOk(JSON.stringify(events).includes('"id":7'), 'the arguments are never in the event');
});

t.test('a waiting call reports progress naming its approval until the wait ends', async (t) => {
  const p = await toolProject(t, app);
  const reports: Array<[string, number]> = [];
  const outcome = await gate.decide(callOf(app, p), waiting(1_500, { onWaiting: (id, elapsed) => void reports.push([id, elapsed]) }));
  t.equal(outcome.decision, 'pending');
  t.ok(reports.length >= 1, `progress reported (${reports.length} times)`);
  t.ok(
    reports.every(([id]) => id === outcome.approvalId),
    'each report names the approval',
  );
  t.same(
    reports.map(([, elapsed]) => elapsed),
    reports.map(([, elapsed]) => elapsed).sort((a, b) => a - b),
    'elapsed only grows',
  );
});

t.test('an approval given while the call waits releases it, once', async (t) => {
  const p = await toolProject(t, app);
  const toolCall = callOf(app, p);
  const { approvalId, outcome } = await waitingCall(app, toolCall);
  const approved = await call('POST', `/mcp/approvals/${approvalId}/approve`, { reason: 'Duplicate issue' });
  t.equal(approved.status, 200, approved.raw);
  t.match(approved.json, { status: 'approved', reason: 'Duplicate issue', decidedBy: String, decidedAt: clock().toISOString(), usedAt: null });
  t.same(await outcome, { decision: 'approved', approvalId });
  t.match((await call('GET', `/mcp/approvals?keyId=${p.key.id}`)).json.data[0], { id: approvalId, status: 'approved', usedAt: clock().toISOString() });
  const again = await gate.decide({ ...toolCall, requestId: 'req_again' }, waiting(0));
  t.match(again, { decision: 'pending' }, 'the same call again needs a new approval');
  t.not(again.approvalId, approvalId);
  t.same(
    (await eventsOf(app, approvalId)).map((each) => each.type).sort(),
    ['management.operation', 'mcp.approval.approved', 'mcp.approval.requested'],
    'the request and the decision are events; the decision is in the audit log too',
  );
});

t.test('a call approved after it stopped waiting runs when retried, and a second retry needs a new approval', async (t) => {
  const p = await toolProject(t, app);
  const toolCall = callOf(app, p);
  const first = await gate.decide(toolCall, waiting(0));
  t.equal(first.decision, 'pending');
  t.equal((await call('POST', `/mcp/approvals/${first.approvalId}/approve`, {})).status, 200);
  t.same(await gate.decide({ ...toolCall, requestId: 'req_retry' }, waiting(0)), { decision: 'approved', approvalId: first.approvalId });
  const second = await gate.decide({ ...toolCall, requestId: 'req_retry_2' }, waiting(0));
  t.equal(second.decision, 'pending');
  t.not(second.approvalId, first.approvalId);
});

t.test('an approval is bound to the arguments and the key: other arguments or another key ask for their own', async (t) => {
  const p = await toolProject(t, app);
  const first = await gate.decide(callOf(app, p), waiting(0));
  await call('POST', `/mcp/approvals/${first.approvalId}/approve`, {});
  const otherArguments = await gate.decide(callOf(app, p, { id: 8 }), waiting(0));
  t.match(otherArguments, { decision: 'pending' });
  t.not(otherArguments.approvalId, first.approvalId);
  const sibling = await createKey(app, { name: 'sibling', projectId: p.projectId });
  const otherKey = await gate.decide({ ...callOf(app, p), keyId: sibling.id }, waiting(0));
  t.match(otherKey, { decision: 'pending' });
  t.same(await gate.decide(callOf(app, p), waiting(0)), { decision: 'approved', approvalId: first.approvalId }, 'the approved call still runs');
});

t.test('a denial answers the waiting call denied with the reason; the call asked again needs a new approval', async (t) => {
  const p = await toolProject(t, app);
  const toolCall = callOf(app, p);
  const { approvalId, outcome } = await waitingCall(app, toolCall);
  const denied = await call('POST', `/mcp/approvals/${approvalId}/deny`, { reason: 'Not this one' });
  t.equal(denied.status, 200, denied.raw);
  t.match(denied.json, { status: 'denied', reason: 'Not this one' });
  t.same(await outcome, { decision: 'denied', approvalId, reason: 'Not this one' });
  const events = await eventsOf(app, approvalId);
  t.match(events.find((each) => each.type === 'mcp.approval.denied')?.data, { approvalId, decidedBy: String, reason: 'Not this one' });
  const again = await gate.decide(toolCall, waiting(0));
  t.equal(again.decision, 'pending');
  t.not(again.approvalId, approvalId);
});

t.test('the sweep lapses an undecided approval at its expiry: the waiting call answers expired and the lapse is an event', async (t) => {
  const p = await toolProject(t, app);
  const { approvalId, outcome } = await waitingCall(app, callOf(app, p));
  clock.advance(TTL);
  t.ok((await gate.expireDue()) >= 1);
  t.same(await outcome, { decision: 'expired', approvalId, reason: null });
  t.match((await call('GET', `/mcp/approvals?keyId=${p.key.id}&status=expired`)).json.data, [{ id: approvalId, status: 'expired', decidedBy: null }]);
  t.match((await eventsOf(app, approvalId)).find((each) => each.type === 'mcp.approval.expired')?.data, { approvalId, wasApproved: false, reason: null });
  const late = await call('POST', `/mcp/approvals/${approvalId}/approve`, {});
  t.equal(late.status, 409);
  t.equal(late.json.error.code, 'approval_not_pending');
});

t.test('an approval never used lapses at its expiry, and the call asked again needs a new one', async (t) => {
  const p = await toolProject(t, app);
  const toolCall = callOf(app, p);
  const first = await gate.decide(toolCall, waiting(0));
  const approved = await call('POST', `/mcp/approvals/${first.approvalId}/approve`, {});
  t.equal(approved.json.expiresAt, new Date(clock().getTime() + TTL).toISOString(), 'the retry has a whole TTL from the decision');
  clock.advance(TTL);
  t.ok((await gate.expireDue()) >= 1);
  t.match((await eventsOf(app, first.approvalId)).find((each) => each.type === 'mcp.approval.expired')?.data, { wasApproved: true });
  const retried = await gate.decide(toolCall, waiting(0));
  t.equal(retried.decision, 'pending');
  t.not(retried.approvalId, first.approvalId);
});

t.test('a changed approval policy invalidates an approval given before; the old one is listed expired saying why', async (t) => {
  const p = await toolProject(t, app);
  const toolCall = callOf(app, p);
  const first = await gate.decide(toolCall, waiting(0));
  await call('POST', `/mcp/approvals/${first.approvalId}/approve`, {});
  t.equal((await call('PATCH', `/mcp/tools/${p.toolId}`, { approval: 'always' })).status, 200);
  const after = await gate.decide(toolCall, waiting(0));
  t.equal(after.decision, 'pending');
  t.not(after.approvalId, first.approvalId);
  t.match((await store.get(app.organizationId, first.approvalId)) ?? {}, { status: 'expired', reason: POLICY_CHANGED, usedAt: null });
  t.equal((await call('PATCH', `/mcp/tools/${p.toolId}`, { approval: 'always', description: 'same policy' })).status, 200);
  t.match(await gate.decide(toolCall, waiting(0)), { decision: 'pending', approvalId: after.approvalId }, 'the same policy set again changes nothing');
});

t.test("a refresh changing the tool's annotations invalidates an approval given before", async (t) => {
  const p = await toolProject(t, app);
  const toolCall = callOf(app, p);
  const first = await gate.decide(toolCall, waiting(0));
  await call('POST', `/mcp/approvals/${first.approvalId}/approve`, {});
  p.mcp.tools = [tool('close_issue', { description: 'Now says more' })];
  t.match((await call('POST', `/mcp/upstreams/${p.upstreamId}/refresh`)).json, { changed: ['close_issue'] });
  t.same(await gate.decide(toolCall, waiting(0)), { decision: 'approved', approvalId: first.approvalId }, 'a new description alone keeps it');
  const second = await gate.decide(toolCall, waiting(0));
  await call('POST', `/mcp/approvals/${second.approvalId}/approve`, {});
  p.mcp.tools = [tool('close_issue', { description: 'Now says more', annotations: { destructiveHint: false } })];
  t.match((await call('POST', `/mcp/upstreams/${p.upstreamId}/refresh`)).json, { changed: ['close_issue'] });
  const third = await gate.decide(toolCall, waiting(0));
  t.equal(third.decision, 'pending');
  t.not(third.approvalId, second.approvalId);
});

t.test('identical concurrent calls share one pending approval, which releases one of them; the other asks again', async (t) => {
  const p = await toolProject(t, app);
  const toolCall = callOf(app, p);
  const [a, b] = await Promise.all([waitingCall(app, { ...toolCall, requestId: 'req_a' }), waitingCall(app, { ...toolCall, requestId: 'req_b' })]);
  t.equal(a.approvalId, b.approvalId, 'one approval for both');
  t.equal((await call('GET', `/mcp/approvals?keyId=${p.key.id}`)).json.data.length, 1);
  await call('POST', `/mcp/approvals/${a.approvalId}/approve`, {});
  const outcomes = await Promise.all([a.outcome, b.outcome]);
  const released = outcomes.filter((each) => each.decision === 'approved');
  const asking = outcomes.filter((each) => each.decision === 'pending');
  t.equal(released.length, 1, 'one runs');
  t.equal(asking.length, 1, 'the other answers pending');
  t.not(asking[0]?.approvalId, a.approvalId, 'with a new approval');
});

t.test('a decision whose wake-up never arrives is found by the waiting call reading its approval again', async (t) => {
  const p = await toolProject(t, app);
  const { approvalId, outcome } = await waitingCall(app, callOf(app, p));
  // Written as the route writes it, but with no announcement: only the re-read can find it.
  const database = app.app.svc.container.resolve(Tokens.Database);
  await store.decide(database, app.organizationId, approvalId, { status: 'approved', by: randomUUID(), reason: null, now: clock(), expiresAt: new Date(clock().getTime() + TTL) });
  t.same(await outcome, { decision: 'approved', approvalId });
});

t.test('an aborted wait answers pending at once', async (t) => {
  const p = await toolProject(t, app);
  const controller = new AbortController();
  const outcome = gate.decide(callOf(app, p), { waitMs: 600_000, signal: controller.signal, onWaiting: () => controller.abort() });
  t.match(await outcome, { decision: 'pending' });
});

t.test('the waiting queue lists pending unexpired approvals oldest first, with tool, upstream and key named', async (t) => {
  const p = await toolProject(t, app);
  const older = await gate.decide(callOf(app, p, { id: 1 }), waiting(0));
  clock.advance(1_000);
  const newer = await gate.decide(callOf(app, p, { id: 2 }), waiting(0));
  const decided = await gate.decide(callOf(app, p, { id: 3 }), waiting(0));
  await call('POST', `/mcp/approvals/${decided.approvalId}/deny`, {});
  const queue = await call('GET', `/mcp/approvals/waiting?projectId=${p.projectId}`);
  t.equal(queue.status, 200, queue.raw);
  t.same(
    (queue.json.data as Json[]).map((each) => each.id),
    [older.approvalId, newer.approvalId],
  );
  t.match(queue.json.data[0], {
    object: 'mcp_approval_waiting',
    tool: { id: p.toolId, name: 'close_issue', gatewayName: `${p.slug}__close_issue` },
    upstream: { id: p.upstreamId, name: 'Tracker' },
    key: { id: p.key.id, name: 'agent' },
  });
  t.equal(queue.json.hasMore, false);
  const one = await call('GET', `/mcp/approvals/waiting?projectId=${p.projectId}&limit=1`);
  t.match(one.json, { data: [{ id: older.approvalId }], hasMore: true });
  t.equal(await gate.countPending(app.organizationId, [p.projectId]), 2);
});

t.test('the list filters by status, tool and project', async (t) => {
  const p = await toolProject(t, app);
  const q = await toolProject(t, app);
  const denied = await gate.decide(callOf(app, p, { id: 1 }), waiting(0));
  await call('POST', `/mcp/approvals/${denied.approvalId}/deny`, {});
  clock.advance(1_000);
  const pending = await gate.decide(callOf(app, p, { id: 2 }), waiting(0));
  const other = await gate.decide(callOf(app, q), waiting(0));
  const ids = async (query: string) => ((await call('GET', `/mcp/approvals?${query}`)).json.data as Json[]).map((each) => each.id);
  t.same(await ids(`projectId=${p.projectId}`), [pending.approvalId, denied.approvalId], 'newest first');
  t.same(await ids(`projectId=${p.projectId}&status=denied`), [denied.approvalId]);
  t.same(await ids(`toolId=${q.toolId}`), [other.approvalId]);
});

t.test('deciding is for owners and admins: API keys, even with mcp:write, and members are refused', async (t) => {
  const p = await toolProject(t, app);
  const pending = await gate.decide(callOf(app, p), waiting(0));
  const byOwnKey = await call('POST', `/mcp/approvals/${pending.approvalId}/approve`, {}, p.key.key);
  t.equal(byOwnKey.status, 403);
  t.equal(byOwnKey.json.error.code, 'role_required', "the agent's own key cannot approve its call");
  const member = await addPerson(app, { role: 'member' });
  const byMember = await call('POST', `/mcp/approvals/${pending.approvalId}/deny`, {}, member.token);
  t.equal(byMember.status, 403);
  t.equal(byMember.json.error.code, 'role_required');
  const admin = await addPerson(app, { role: 'admin' });
  const byAdmin = await call('POST', `/mcp/approvals/${pending.approvalId}/approve`, {}, admin.token);
  t.equal(byAdmin.status, 200, byAdmin.raw);
  t.equal(byAdmin.json.decidedBy, admin.personId);
});

t.test('deciding an unknown approval is 404, a decided one 409, and the body is strict', async (t) => {
  const p = await toolProject(t, app);
  const unknown = await call('POST', `/mcp/approvals/${randomUUID()}/approve`, {});
  t.equal(unknown.status, 404);
  t.equal(unknown.json.error.code, 'mcp_approval_not_found');
  const pending = await gate.decide(callOf(app, p), waiting(0));
  const strict = await call('POST', `/mcp/approvals/${pending.approvalId}/deny`, { reason: 'x', force: true });
  t.equal(strict.status, 400);
  t.match(strict.json.error, { param: 'force' });
  t.equal((await call('POST', `/mcp/approvals/${pending.approvalId}/deny`, {})).status, 200);
  const twice = await call('POST', `/mcp/approvals/${pending.approvalId}/approve`, {});
  t.equal(twice.status, 409);
  t.equal(twice.json.error.code, 'approval_not_pending');
});

t.test("another organisation's owner meets 404 for its approvals and sees none of them", async (t) => {
  const p = await toolProject(t, app);
  const pending = await gate.decide(callOf(app, p), waiting(0));
  const container = app.app.svc.container;
  const other = await createOrganizationWithOwner(container.resolve(Tokens.Database), container.resolve(Tokens.IdentityFactory), {
    name: 'Elsewhere',
    ownerEmail: `elsewhere-${randomUUID()}@example.com`,
    ownerName: 'Elsewhere owner',
  });
  const { token } = await issueSession(container.resolve(Tokens.Identity), { personId: other.owner.id, ttlDays: 1, now: clock() });
  const refused = await call('POST', `/mcp/approvals/${pending.approvalId}/approve`, {}, token);
  t.equal(refused.status, 404);
  t.equal(refused.json.error.code, 'mcp_approval_not_found');
  t.same((await call('GET', '/mcp/approvals', undefined, token)).json.data, []);
  t.match((await store.get(app.organizationId, pending.approvalId)) ?? {}, { status: 'pending' }, 'it is still waiting');
});

t.test("another project's key does not see its approvals", async (t) => {
  const p = await toolProject(t, app);
  const q = await toolProject(t, app);
  await gate.decide(callOf(app, p), waiting(0));
  const seen = await call('GET', `/mcp/approvals?projectId=${p.projectId}`, undefined, q.key.key);
  t.equal(seen.status, 404);
  t.same((await call('GET', '/mcp/approvals', undefined, q.key.key)).json.data, []);
  t.same((await call('GET', '/mcp/approvals/waiting', undefined, q.key.key)).json.data, []);
});

t.test('a removed tool takes its approvals; a call waiting on one answers expired', async (t) => {
  const p = await toolProject(t, app);
  const { approvalId, outcome } = await waitingCall(app, callOf(app, p));
  p.mcp.tools = [];
  await call('POST', `/mcp/upstreams/${p.upstreamId}/refresh`);
  await gate.decide(callOf(app, p), waiting(0)).then(
    () => t.fail('a call of a removed tool is refused'),
    (error) => t.match(error, { code: 'mcp_tool_not_found' }),
  );
  t.match(await outcome, { decision: 'expired', approvalId, reason: /removed/ });
});
