import { randomBytes } from 'node:crypto';
import t from 'tap';
import { generateToken, SESSION_PREFIX } from '../../../core/identity/api-tokens.ts';
import { allPlugins, buildTestApp, realServersConfig, type TestApp } from '../../helpers/app.ts';
import { testClock } from '../../helpers/jobs.ts';
import { call, callOf, gateOf, toolProject, waiting, waitingCall } from './approvals-fixtures.ts';

/**
 * Approvals across two replicas sharing PostgreSQL and Redis: a decision made on one releases a call
 * waiting on the other. Waiters re-read their approval only every ten minutes here (they wait one), so a call released in
 * time was woken by the decision's announcement. Skipped without TEST_PG_URL and TEST_REDIS_URL.
 */
t.setTimeout(300_000);

const TTL = 600_000;
const servers = realServersConfig();
const clock = testClock(new Date().toISOString());

async function replicas(): Promise<[TestApp, TestApp]> {
  if (!servers) throw new Error('unreachable: skipped without servers');
  t.teardown(() => servers.dropSchema());
  const config = {
    storage: servers.storage,
    outbound: { allowPrivateNetwork: true },
    bootstrap: { ownerToken: generateToken(SESSION_PREFIX) },
    secrets: { keys: [`k1:${randomBytes(32).toString('base64')}`] },
    plugins: { ...allPlugins(), 'tool-gateway': { approvalTtlMs: TTL, approvalProgressMs: 100, approvalRecheckMs: 600_000 } },
  };
  return [await buildTestApp(t, { config, clock }), await buildTestApp(t, { config, clock })];
}

if (!servers) {
  t.pass('skipped: needs TEST_PG_URL and TEST_REDIS_URL');
} else {
  const [a, b] = await replicas();

  t.test('an approval given on one replica releases the call waiting on the other', async (t) => {
    const p = await toolProject(t, a);
    const { approvalId, outcome } = await waitingCall(a, callOf(a, p));
    t.equal((await call(b, 'POST', `/mcp/approvals/${approvalId}/approve`, {})).status, 200);
    t.same(await outcome, { decision: 'approved', approvalId });
  });

  t.test('a denial on one replica answers the call waiting on the other', async (t) => {
    const p = await toolProject(t, a);
    const { approvalId, outcome } = await waitingCall(a, callOf(a, p));
    t.equal((await call(b, 'POST', `/mcp/approvals/${approvalId}/deny`, { reason: 'No' })).status, 200);
    t.same(await outcome, { decision: 'denied', approvalId, reason: 'No' });
  });

  t.test('approved on one replica, the call retried on the other runs once; a retry on the first needs a new approval', async (t) => {
    const p = await toolProject(t, a);
    const toolCall = callOf(a, p);
    const first = await gateOf(a).decide(toolCall, waiting(0));
    t.equal(first.decision, 'pending');
    t.equal((await call(a, 'POST', `/mcp/approvals/${first.approvalId}/approve`, {})).status, 200);
    t.same(await gateOf(b).decide(toolCall, waiting(0)), { decision: 'approved', approvalId: first.approvalId });
    const again = await gateOf(a).decide(toolCall, waiting(0));
    t.equal(again.decision, 'pending');
    t.not(again.approvalId, first.approvalId);
  });

  t.test('identical calls on both replicas share one approval, which releases exactly one of them', async (t) => {
    const p = await toolProject(t, a);
    const toolCall = callOf(a, p);
    const [onA, onB] = await Promise.all([waitingCall(a, { ...toolCall, requestId: 'req_a' }), waitingCall(b, { ...toolCall, requestId: 'req_b' })]);
    t.equal(onA.approvalId, onB.approvalId, 'one approval for both');
    t.equal((await call(a, 'POST', `/mcp/approvals/${onA.approvalId}/approve`, {})).status, 200);
    const outcomes = await Promise.all([onA.outcome, onB.outcome]);
    t.equal(outcomes.filter((each) => each.decision === 'approved').length, 1, 'one runs');
    const asking = outcomes.find((each) => each.decision === 'pending');
    t.ok(asking && asking.approvalId !== onA.approvalId, 'the other answers pending with a new approval');
  });

  t.test('the sweep on one replica lapses an approval: the call waiting on the other answers expired', async (t) => {
    const p = await toolProject(t, a);
    const { approvalId, outcome } = await waitingCall(a, callOf(a, p));
    clock.advance(TTL);
    t.ok((await gateOf(b).expireDue()) >= 1);
    t.same(await outcome, { decision: 'expired', approvalId, reason: null });
  });
}
