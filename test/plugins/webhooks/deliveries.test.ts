import net, { type LookupFunction } from 'node:net';
import t from 'tap';
import { SqlMailOutbox } from '../../../adapters/sql/mail-outbox.ts';
import { buildTestApp, type TapLike } from '../../helpers/app.ts';
import { type FakeCustomerEndpoint, startFakeCustomerEndpoint } from '../../fakes/fake-customer-endpoint.ts';
import { testClock } from '../../helpers/jobs.ts';
import { createWebhook, database, deliverDue, deliveriesOf, emitKeyCreated, verifyDelivery, webhookApp } from '../../helpers/webhooks.ts';

/**
 * Deliveries as a receiver sees them: a real listening receiver verifies each with the reference
 * verifier (`standardwebhooks`), and the service's clock, moved by the test, decides when retries
 * come (the job runner runs what is due; nothing sleeps).
 */
t.setTimeout(300_000);

async function receiver(t: TapLike): Promise<FakeCustomerEndpoint> {
  const started = await startFakeCustomerEndpoint();
  t.teardown(() => started.close());
  return started;
}

/** A clock near real time, so the verifier's five-minute tolerance holds until a test moves it. */
const clockAtNow = () => testClock(new Date().toISOString());

t.test('a receiver verifies a delivery with standardwebhooks: the headers and payload as documented', async (t) => {
  const clock = clockAtNow();
  const test = await webhookApp(t, { clock });
  const hook = await receiver(t);
  const webhook = await createWebhook(test, { url: `${hook.url}/in`, eventTypes: ['key.created'] });
  const key = await emitKeyCreated(test);
  await deliverDue(test);

  const request = await hook.arrived(1);
  const payload = verifyDelivery(webhook.secret, request) as Record<string, unknown>;
  t.equal(request.method, 'POST');
  t.equal(request.path, '/in');
  t.equal(request.headers['content-type'], 'application/json');
  t.match(request.headers['user-agent'], /^svc-webhooks\//);
  t.match(request.headers['webhook-id'], /^msg_[0-9a-f]{32}$/);
  t.equal(request.headers['webhook-timestamp'], String(Math.floor(clock().getTime() / 1000)), 'the attempt time, in unix seconds of the service clock');
  t.match(request.headers['webhook-signature'], /^v1,[A-Za-z0-9+/]+=*$/, 'one v1 signature');
  t.match(payload, {
    type: 'key.created',
    organizationId: test.organizationId,
    projectId: test.defaultProjectId,
    data: { keyId: key.id, projectId: test.defaultProjectId, scopes: ['inference'] },
  });
  t.match(payload['id'], /^[0-9a-f-]{36}$/, 'the event id');
  t.ok(!Number.isNaN(Date.parse(String(payload['timestamp']))), 'timestamp: when the event occurred');

  const [delivery] = await deliveriesOf(test, webhook.id);
  t.match(delivery, { messageId: request.headers['webhook-id'], eventId: payload['id'], eventType: 'key.created', status: 'succeeded', attemptCount: 1, nextAttemptAt: null, payload });
  t.match(delivery?.attempts, [{ attempt: 1, outcome: 'succeeded', statusCode: 200, responseBody: 'ok', errorKind: null, nextAttemptAt: null }]);
});

t.test('a body changed in transit, or signed with another secret, fails verification', async (t) => {
  const test = await webhookApp(t, { clock: clockAtNow() });
  const hook = await receiver(t);
  const webhook = await createWebhook(test, { url: hook.url });
  const other = await createWebhook(test, { url: `${hook.url}/other`, eventTypes: ['project.member_added'] });
  await emitKeyCreated(test);
  await deliverDue(test);
  const request = await hook.arrived(1);
  t.throws(() => verifyDelivery(webhook.secret, { ...request, body: request.body.replace('key.created', 'key.revoked') }), /signature/i);
  t.throws(() => verifyDelivery(other.secret, request), /signature/i);
});

t.test('an endpoint gets the types it subscribed to, and "*" every public type', async (t) => {
  const test = await webhookApp(t, { clock: clockAtNow() });
  const hook = await receiver(t);
  const only = await createWebhook(test, { url: `${hook.url}/only`, eventTypes: ['key.revoked'] });
  const every = await createWebhook(test, { url: `${hook.url}/every`, eventTypes: ['*'] });
  const key = await emitKeyCreated(test);
  t.equal((await test.call('DELETE', `/client/keys/${key.id}`)).statusCode, 200);
  await deliverDue(test);
  t.same(
    (await deliveriesOf(test, only.id)).map((d) => d.eventType),
    ['key.revoked'],
  );
  t.same((await deliveriesOf(test, every.id)).map((d) => d.eventType).sort(), ['key.created', 'key.revoked']);
  t.equal(hook.requests.length, 3);
});

t.test("an endpoint of a project gets that project's events only; an endpoint of the organisation gets every project's", async (t) => {
  const test = await webhookApp(t, { clock: clockAtNow() });
  const hook = await receiver(t);
  const other = (await test.call('POST', '/client/projects', { body: { name: 'other project' } })).json() as { id: string };
  const ofDefault = await createWebhook(test, { url: `${hook.url}/default`, eventTypes: ['key.created'], projectId: test.defaultProjectId });
  const ofOrganisation = await createWebhook(test, { url: `${hook.url}/all`, eventTypes: ['key.created'] });
  await emitKeyCreated(test, { projectId: test.defaultProjectId });
  await emitKeyCreated(test, { projectId: other.id });
  await deliverDue(test);
  t.same(
    (await deliveriesOf(test, ofDefault.id)).map((d) => d.payload['projectId']),
    [test.defaultProjectId],
  );
  t.same((await deliveriesOf(test, ofOrganisation.id)).map((d) => d.payload['projectId']).sort(), [test.defaultProjectId, other.id].sort());
});

t.test('a receiver answering 500 is retried on the schedule, with the same webhook-id and body each time, until it answers 2xx', async (t) => {
  const clock = clockAtNow();
  const test = await webhookApp(t, { clock });
  const hook = await receiver(t);
  let answers = 0;
  hook.handle((_req, res) => {
    answers += 1;
    res.writeHead(answers < 3 ? 500 : 204, { 'content-type': 'text/plain' }).end(answers < 3 ? 'database down' : '');
  });
  const webhook = await createWebhook(test, { url: hook.url, eventTypes: ['key.created'] });
  await emitKeyCreated(test);
  const times: Date[] = [];
  times.push(clock());
  await deliverDue(test);
  let [delivery] = await deliveriesOf(test, webhook.id);
  t.match(delivery, { status: 'pending', attemptCount: 1 });
  t.equal(delivery?.nextAttemptAt, new Date(clock().getTime() + 5_000).toISOString(), 'the first retry 5 s later');

  clock.advance(5_000 - 1);
  await deliverDue(test);
  t.equal(hook.requests.length, 1, 'not before its time');
  clock.advance(1);
  times.push(clock());
  await deliverDue(test);
  [delivery] = await deliveriesOf(test, webhook.id);
  t.equal(delivery?.nextAttemptAt, new Date(clock().getTime() + 300_000).toISOString(), 'the second retry 5 min later');

  clock.advance(300_000);
  times.push(clock());
  await deliverDue(test);
  [delivery] = await deliveriesOf(test, webhook.id);
  t.match(delivery, { status: 'succeeded', attemptCount: 3, nextAttemptAt: null });
  t.match(delivery?.attempts, [
    { attempt: 3, outcome: 'succeeded', statusCode: 204, errorKind: null },
    { attempt: 2, outcome: 'failed', statusCode: 500, errorKind: 'http_status', responseBody: 'database down', error: 'HTTP 500' },
    { attempt: 1, outcome: 'failed', statusCode: 500, errorKind: 'http_status' },
  ]);

  t.equal(hook.requests.length, 3);
  const ids = new Set(hook.requests.map((request) => request.headers['webhook-id']));
  t.equal(ids.size, 1, 'one webhook-id on every attempt');
  t.equal(new Set(hook.requests.map((request) => request.body)).size, 1, 'the same body');
  hook.requests.forEach((request, index) => {
    t.equal(request.headers['webhook-timestamp'], String(Math.floor(times[index]!.getTime() / 1000)), `attempt ${index + 1} is stamped when it was made`);
    t.ok(verifyDelivery(webhook.secret, request, times[index]), `attempt ${index + 1} verifies`);
  });
});

t.test('a receiver that redirects (302) is not followed: the attempt fails as a redirect and is retried', async (t) => {
  const clock = clockAtNow();
  const test = await webhookApp(t, { clock });
  const hook = await receiver(t);
  const elsewhere = await receiver(t);
  hook.handle((_req, res) => res.writeHead(302, { location: `${elsewhere.url}/stolen` }).end());
  const webhook = await createWebhook(test, { url: hook.url, eventTypes: ['key.created'] });
  await emitKeyCreated(test);
  await deliverDue(test);
  const [delivery] = await deliveriesOf(test, webhook.id);
  t.match(delivery, { status: 'pending', attemptCount: 1, nextAttemptAt: new Date(clock().getTime() + 5_000).toISOString() });
  t.match(delivery?.attempts[0], { outcome: 'failed', statusCode: 302, errorKind: 'redirect', error: /redirects are not followed/ });
  t.equal(elsewhere.requests.length, 0, 'nothing went where the redirect pointed');
  clock.advance(5_000);
  await deliverDue(test);
  t.equal(hook.requests.length, 2, 'retried at the same URL');
});

t.test('a receiver that does not answer within the timeout fails the attempt as timeout, and it is retried', async (t) => {
  const clock = clockAtNow();
  const test = await webhookApp(t, { clock });
  const hook = await receiver(t);
  hook.handle(() => undefined);
  const webhook = await createWebhook(test, { url: hook.url, eventTypes: ['key.created'] });
  await emitKeyCreated(test);
  await deliverDue(test);
  const [delivery] = await deliveriesOf(test, webhook.id);
  t.match(delivery, { status: 'pending', nextAttemptAt: new Date(clock().getTime() + 5_000).toISOString() });
  t.match(delivery?.attempts[0], { outcome: 'failed', statusCode: null, errorKind: 'timeout' });
  t.ok((delivery?.attempts[0]?.durationMs ?? 0) >= 900, 'it waited for the timeout');
  t.equal(await hook.requests[0]?.outcome, 'closed', 'and hung up');
  hook.handle((_req, res) => res.writeHead(200).end());
  clock.advance(5_000);
  await deliverDue(test);
  t.match((await deliveriesOf(test, webhook.id))[0], { status: 'succeeded', attemptCount: 2 });
});

t.test("retry-after postpones a retry beyond the schedule's, up to the cap; a shorter one does not bring it forward", async (t) => {
  const clock = clockAtNow();
  const test = await webhookApp(t, { clock, webhooks: { maxRetryAfterSeconds: 7_200 } });
  const hook = await receiver(t);
  const asked = ['3600', '1', new Date(clock().getTime() + 10 * 86_400_000).toUTCString()];
  hook.handle((_req, res) => res.writeHead(503, { 'retry-after': asked[hook.requests.length - 1] ?? '0' }).end());
  const webhook = await createWebhook(test, { url: hook.url, eventTypes: ['key.created'] });
  await emitKeyCreated(test);
  await deliverDue(test);
  let [delivery] = await deliveriesOf(test, webhook.id);
  t.equal(delivery?.nextAttemptAt, new Date(clock().getTime() + 3_600_000).toISOString(), 'an hour, as asked, not 5 s');
  clock.advance(3_600_000);
  await deliverDue(test);
  [delivery] = await deliveriesOf(test, webhook.id);
  t.equal(delivery?.nextAttemptAt, new Date(clock().getTime() + 300_000).toISOString(), 'retry-after: 1 leaves the schedule’s 5 min');
  clock.advance(300_000);
  await deliverDue(test);
  [delivery] = await deliveriesOf(test, webhook.id);
  t.equal(delivery?.nextAttemptAt, new Date(clock().getTime() + 7_200_000).toISOString(), 'an HTTP date ten days ahead is capped at maxRetryAfterSeconds');
});

t.test('after the last scheduled attempt a delivery has failed for good', async (t) => {
  const clock = clockAtNow();
  const test = await webhookApp(t, { clock });
  const hook = await receiver(t);
  hook.handle((_req, res) => res.writeHead(500).end());
  const webhook = await createWebhook(test, { url: hook.url, eventTypes: ['key.created'] });
  await emitKeyCreated(test);
  const waits = [5, 300, 1_800, 7_200, 18_000, 36_000, 36_000];
  await deliverDue(test);
  for (const wait of waits) {
    clock.advance(wait * 1000);
    await deliverDue(test);
  }
  const [delivery] = await deliveriesOf(test, webhook.id);
  t.match(delivery, { status: 'failed', attemptCount: 8, nextAttemptAt: null });
  t.equal(delivery?.attempts[0]?.nextAttemptAt, null, 'the last attempt names no next one');
  clock.advance(86_400_000);
  await deliverDue(test);
  t.equal(hook.requests.length, 8, 'nothing more is sent');
  t.equal((await test.call('GET', `/client/webhooks/${webhook.id}`)).json().enabled, true, 'one failed delivery does not switch the endpoint off');
});

t.test('an endpoint with no successful attempt for 5 days is switched off when a delivery fails for good: webhook.disabled, and its owners mailed', async (t) => {
  const clock = clockAtNow();
  const test = await webhookApp(t, { clock });
  const failing = await receiver(t);
  failing.handle((_req, res) => res.writeHead(500).end());
  const watcher = await receiver(t);
  const broken = await createWebhook(test, { url: `${failing.url}/in`, eventTypes: ['key.created'], description: 'Billing sync' });
  const watching = await createWebhook(test, { url: watcher.url, eventTypes: ['webhook.disabled'] });
  const waits = [5, 300, 1_800, 7_200, 18_000, 36_000, 36_000];
  const failForGood = async () => {
    await emitKeyCreated(test);
    await deliverDue(test);
    for (const wait of waits) {
      clock.advance(wait * 1000);
      await deliverDue(test);
    }
  };
  const firstFailure = clock();
  await failForGood();
  t.equal((await test.call('GET', `/client/webhooks/${broken.id}`)).json().enabled, true, 'after about a day of failures it stays on');

  clock.advance(4 * 86_400_000);
  await failForGood();
  const endpoint = (await test.call('GET', `/client/webhooks/${broken.id}`)).json();
  t.match(endpoint, { enabled: false, disabledReason: `No delivery attempt has succeeded since ${firstFailure.toISOString()}; the last one failed with HTTP 500` });
  t.equal(endpoint.disabledAt, clock().toISOString());

  const notice = await watcher.arrived(1);
  t.match(verifyDelivery(watching.secret, notice, clock()), {
    type: 'webhook.disabled',
    projectId: null,
    data: { webhookId: broken.id, projectId: null, origin: failing.url, description: 'Billing sync', failingSince: firstFailure.toISOString() },
  });
  t.notOk(notice.body.includes('/in'), "the URL's path is left out");

  const owner = (await test.call('GET', '/client/whoami')).json().credential.email as string;
  const mails = (await new SqlMailOutbox(database(test), test.config.mail.from).read({ to: owner })).filter((mail) => mail.subject.startsWith('Webhook endpoint switched off'));
  t.equal(mails.length, 1, 'the owner is mailed once');
  t.match(mails[0], { subject: `Webhook endpoint switched off: ${failing.url}`, text: new RegExp(broken.id) });

  const sent = failing.requests.length;
  await emitKeyCreated(test);
  await deliverDue(test);
  t.equal(failing.requests.length, sent, 'nothing more is sent to it');
});

type LookupCallback = (error: NodeJS.ErrnoException | null, address: string | Array<{ address: string; family: number }>, family?: number) => void;

/** A resolver answering every name with the next of these addresses, as a hostile DNS server could (the last one again once they run out). */
function answersInTurn(...addresses: string[]): LookupFunction {
  let next = 0;
  return ((_hostname: string, options: { all?: boolean }, callback: LookupCallback) => {
    const address = addresses[Math.min(next++, addresses.length - 1)]!;
    const family = net.isIP(address);
    if (options.all) callback(null, [{ address, family }]);
    else callback(null, address, family);
  }) as unknown as LookupFunction;
}

t.test('a name that resolves to a private address when the attempt connects (DNS rebinding) is refused: the attempt fails refused_address', async (t) => {
  const hook = await receiver(t);
  // The guard on, as in production: public when the URL is saved, loopback when the attempt dials.
  const test = await buildTestApp(t, { clock: clockAtNow(), outboundLookup: answersInTurn('93.184.216.34', '127.0.0.1') });
  const webhook = await createWebhook(test, { url: `https://hooks.example.com:${hook.port}/in`, eventTypes: ['key.created'] });
  await emitKeyCreated(test);
  await deliverDue(test);
  const [delivery] = await deliveriesOf(test, webhook.id);
  t.match(delivery, { status: 'pending', attemptCount: 1 });
  t.match(delivery?.attempts[0], { outcome: 'failed', statusCode: null, errorKind: 'refused_address', error: /127\.0\.0\.1/ });
  t.equal(hook.connections, 0, 'nothing connected to the private address');
});

t.test('a delivery run again after its worker was presumed dead carries the same webhook-id and body, and succeeds once', async (t) => {
  const clock = clockAtNow();
  const test = await webhookApp(t, { clock });
  const hook = await receiver(t);
  const held: Array<() => void> = [];
  hook.handle((_req, res) => {
    const answer = () => res.writeHead(200).end();
    // The first attempt hangs, as it would on a worker that died mid-delivery; the repeat is answered.
    if (hook.requests.length === 1) held.push(answer);
    else answer();
  });
  const webhook = await createWebhook(test, { url: hook.url, eventTypes: ['key.created'] });
  await emitKeyCreated(test);
  const running = deliverDue(test);
  const first = await hook.arrived(1);

  // Its lease lapses (the worker stopped renewing it); the next poll queues it again and runs it.
  clock.advance(30_001);
  await test.app.svc.workers.pollOnce();
  const repeat = await hook.arrived(2);
  for (const answer of held) answer();
  await running;
  await test.app.svc.workers.settled();

  t.equal(repeat.headers['webhook-id'], first.headers['webhook-id'], 'the same webhook-id');
  t.equal(repeat.body, first.body, 'the same body');
  t.ok(verifyDelivery(webhook.secret, first, clock()));
  t.ok(verifyDelivery(webhook.secret, repeat, clock()));
  const [delivery] = await deliveriesOf(test, webhook.id);
  t.match(delivery, { status: 'succeeded', attemptCount: 1 }, 'the presumed-dead run records nothing: its completion is fenced');
});
