import { randomBytes } from 'node:crypto';
import t from 'tap';
import type { AppConfigInput } from '../../../config/schema.ts';
import { generateToken, SESSION_PREFIX } from '../../../core/identity/api-tokens.ts';
import { type FakeCustomerEndpoint, startFakeCustomerEndpoint } from '../../fakes/fake-customer-endpoint.ts';
import { realServersConfig, type TapLike, type TestApp } from '../../helpers/app.ts';
import { createSharedPgSchema, testPgUrl } from '../../helpers/databases.ts';
import { eventually } from '../../helpers/eventually.ts';
import { testClock } from '../../helpers/jobs.ts';
import { createWebhook, database, deliverDue, deliveriesOf, emitKeyCreated, verifyDelivery, webhookApp, webhookJobsReport } from '../../helpers/webhooks.ts';

/**
 * Deliveries across processes, on the real servers: what one replica began another finishes after a
 * restart or a crash, with the same webhook-id, and replicas sharing the queue deliver each event
 * once per endpoint. Skipped without TEST_PG_URL (and TEST_REDIS_URL for the replicas in step).
 */
t.setTimeout(300_000);

async function receiver(t: TapLike): Promise<FakeCustomerEndpoint> {
  const started = await startFakeCustomerEndpoint();
  t.teardown(() => started.close());
  return started;
}

/** One deployment's settings for every replica: the database, the owner's token, the key that seals customers' secrets. */
async function sharedDeployment(t: TapLike): Promise<AppConfigInput> {
  const shared = await createSharedPgSchema();
  t.teardown(() => shared.cleanup());
  return {
    storage: { database: { driver: 'postgres', ...shared.options, poolSize: 5 }, coordination: { driver: 'memory' } },
    bootstrap: { ownerToken: generateToken(SESSION_PREFIX) },
    secrets: { keys: [`k1:${randomBytes(32).toString('base64')}`] },
  };
}

const onPostgres = { skip: testPgUrl() ? false : 'needs TEST_PG_URL' };

t.test('deliveries survive a restart: replica A attempts and stops mid-schedule, replica B on the same database delivers the rest', onPostgres, async (t) => {
  const config = await sharedDeployment(t);
  const clock = testClock(new Date().toISOString());
  const hook = await receiver(t);
  hook.handle((_req, res) => res.writeHead(hook.requests.length === 1 ? 500 : 200).end());

  const a = await webhookApp(t, { config, clock });
  const webhook = await createWebhook(a, { url: hook.url, eventTypes: ['key.created'] });
  await emitKeyCreated(a);
  await deliverDue(a);
  const attempted = t.match((await deliveriesOf(a, webhook.id))[0], { status: 'pending', attemptCount: 1 }, 'A made the first attempt');
  if (!attempted) t.comment(`${await webhookJobsReport(a)}\nrequests received: ${hook.requests.length}`);
  const firstAt = clock();
  await a.app.close();

  clock.advance(5_000);
  const b = await webhookApp(t, { config, clock });
  await deliverDue(b);
  const [delivery] = await deliveriesOf(b, webhook.id);
  t.match(delivery, { status: 'succeeded', attemptCount: 2 });
  t.same(
    delivery?.attempts.map((attempt) => attempt.statusCode),
    [200, 500],
  );
  t.equal(hook.requests.length, 2);
  t.equal(hook.requests[1]?.headers['webhook-id'], hook.requests[0]?.headers['webhook-id'], 'the same webhook-id from both replicas');
  t.ok(verifyDelivery(webhook.secret, hook.requests[0]!, firstAt), "A's attempt verifies");
  t.ok(verifyDelivery(webhook.secret, hook.requests[1]!, clock()), "B's attempt verifies: the secret came from the shared vault");
});

t.test('a delivery repeated by replica B after replica A died mid-attempt carries the same webhook-id, and succeeds once', onPostgres, async (t) => {
  const config = await sharedDeployment(t);
  const clock = testClock(new Date().toISOString());
  const hook = await receiver(t);
  const held: Array<() => void> = [];
  hook.handle((_req, res) => {
    const answer = () => res.writeHead(200).end();
    if (hook.requests.length === 1) held.push(answer);
    else answer();
  });
  const a = await webhookApp(t, { config, clock });
  const b = await webhookApp(t, { config, clock });
  const webhook = await createWebhook(a, { url: hook.url, eventTypes: ['key.created'] });
  await emitKeyCreated(a);
  const running = deliverDue(a);
  const first = await hook.arrived(1);

  // A is gone as far as the queue can tell: it claims nothing more and its lease lapses.
  a.app.svc.workers.stopClaiming();
  clock.advance(30_001);
  await b.app.svc.workers.pollOnce();
  const repeat = await hook.arrived(2);
  await b.app.svc.workers.settled();
  for (const answer of held) answer();
  await running;

  t.equal(repeat.headers['webhook-id'], first.headers['webhook-id']);
  t.equal(repeat.body, first.body);
  t.ok(verifyDelivery(webhook.secret, repeat, clock()));
  t.match((await deliveriesOf(b, webhook.id))[0], { status: 'succeeded', attemptCount: 1 }, "A's late completion is fenced off");
});

const servers = realServersConfig();

t.test('two replicas sharing PostgreSQL and Redis deliver each event once per endpoint', { skip: servers ? false : 'needs TEST_PG_URL and TEST_REDIS_URL' }, async (t) => {
  t.teardown(() => servers!.dropSchema());
  const config: AppConfigInput = {
    storage: servers!.storage,
    bootstrap: { ownerToken: generateToken(SESSION_PREFIX) },
    secrets: { keys: [`k1:${randomBytes(32).toString('base64')}`] },
    jobs: { pollIntervalMs: 200 },
  };
  const replicas: TestApp[] = [await webhookApp(t, { config }), await webhookApp(t, { config })];
  const [a, b] = replicas as [TestApp, TestApp];
  const first = await receiver(t);
  const second = await receiver(t);
  const hooks = [await createWebhook(a, { url: first.url, eventTypes: ['key.created'] }), await createWebhook(b, { url: second.url, eventTypes: ['key.created'] })];

  const EVENTS = 20;
  const keys: string[] = [];
  for (let i = 0; i < EVENTS; i += 1) keys.push((await emitKeyCreated(replicas[i % 2]!)).id);

  await eventually(() => first.requests.length >= EVENTS && second.requests.length >= EVENTS, 'both endpoints to receive every event', { timeoutMs: 120_000 });
  // Then until nothing of the webhooks is queued or running anywhere, so a late duplicate would have shown.
  await eventually(
    async () =>
      Number((await database(a).query("SELECT count(*)::int AS n FROM jobs WHERE queue IN ('webhooks.deliver', 'event.webhooks') AND state IN ('queued', 'running')")).rows[0]?.['n']) === 0,
    'the webhook jobs to finish',
    { timeoutMs: 60_000 },
  );
  await Promise.all(replicas.map((replica) => replica.app.svc.workers.settled()));

  for (const [index, hook] of [first, second].entries()) {
    const secret = hooks[index]!.secret;
    t.equal(hook.requests.length, EVENTS, `endpoint ${index + 1}: one request per event`);
    t.equal(new Set(hook.requests.map((request) => request.headers['webhook-id'])).size, EVENTS, `endpoint ${index + 1}: a webhook-id each`);
    const delivered = hook.requests.map((request) => (verifyDelivery(secret, request) as { data: { keyId: string } }).data.keyId);
    t.same([...delivered].sort(), [...keys].sort(), `endpoint ${index + 1}: every event, each once`);
  }
  const listed = await deliveriesOf(a, hooks[0]!.id, '?limit=200');
  t.equal(listed.length, EVENTS);
  t.ok(
    listed.every((delivery) => delivery.status === 'succeeded' && delivery.attemptCount === 1),
    'every delivery succeeded at its first attempt',
  );
});
