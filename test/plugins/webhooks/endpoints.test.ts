import net, { type LookupFunction } from 'node:net';
import t from 'tap';
import { Webhook } from 'standardwebhooks';
import { allPlugins, buildTestApp, createKey, type TapLike } from '../../helpers/app.ts';
import { startFakeCustomerEndpoint, type FakeCustomerEndpoint } from '../../fakes/fake-customer-endpoint.ts';
import { testClock } from '../../helpers/jobs.ts';
import { createWebhook, database, deliverDue, deliveriesOf, emitKeyCreated, verifyDelivery, webhookApp } from '../../helpers/webhooks.ts';

/**
 * Webhook endpoints through the management API: what is stored and shown (never the secret after
 * creation), what URL and event types are accepted, who reaches which endpoint, rotation, tests and
 * resends. Endpoints that must really be called run a loopback receiver in an app whose operator
 * allows private networks; the URL guard runs in an app that does not.
 */
t.setTimeout(300_000);

type LookupCallback = (error: NodeJS.ErrnoException | null, address: string | Array<{ address: string; family: number }>, family?: number) => void;

/** A resolver with a fixed table of names, as DNS would answer them; anything else does not resolve. */
function resolving(table: Record<string, string>): LookupFunction {
  return ((hostname: string, options: { all?: boolean }, callback: LookupCallback) => {
    const address = table[hostname];
    if (!address) return callback(Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' }), '', 0);
    const family = net.isIP(address);
    if (options.all) callback(null, [{ address, family }]);
    else callback(null, address, family);
  }) as unknown as LookupFunction;
}

const PUBLIC_NAME = 'https://hooks.example.com/in';
/** The URL guard on, as in production; hooks.example.com resolves to a public address, internal.example to a private one. */
const guardedApp = (t: TapLike) => buildTestApp(t, { outboundLookup: resolving({ 'hooks.example.com': '93.184.216.34', 'internal.example': '10.0.0.5' }) });

async function receiver(t: TapLike): Promise<FakeCustomerEndpoint> {
  const started = await startFakeCustomerEndpoint();
  t.teardown(() => started.close());
  return started;
}

const codeOf = (response: { json(): unknown }) => (response.json() as { error?: { code?: string; param?: string | null } }).error;

t.test('endpoints through the API, with the URL guard on', async (t) => {
  const test = await guardedApp(t);

  t.test('creating an endpoint answers its signing secret once; list and get never show it, and it is stored encrypted', async (t) => {
    const created = await test.call('POST', '/client/webhooks', { body: { url: PUBLIC_NAME, eventTypes: ['key.created'], description: 'Billing sync' } });
    t.equal(created.statusCode, 201);
    const body = created.json() as Record<string, unknown> & { id: string; secret: string };
    t.match(body, { object: 'webhook_endpoint', url: PUBLIC_NAME, description: 'Billing sync', eventTypes: ['key.created'], enabled: true, projectId: null, disabledReason: null });
    t.match(body.secret, /^whsec_[A-Za-z0-9+/]{43}=$/);
    t.equal(Buffer.from(body.secret.slice('whsec_'.length), 'base64').length, 32, '32 random bytes');
    t.doesNotThrow(() => new Webhook(body.secret), 'the reference verifier takes it');

    const got = await test.call('GET', `/client/webhooks/${body.id}`);
    const listed = await test.call('GET', '/client/webhooks');
    for (const [what, response] of [
      ['get', got],
      ['list', listed],
    ] as const) {
      t.equal(response.statusCode, 200, what);
      t.notOk(response.body.includes(body.secret), `${what} does not show the secret`);
      t.notOk(response.body.includes('whsec_'), `${what} shows no secret at all`);
    }
    t.same(
      (listed.json() as { data: Array<{ id: string }> }).data.map((e) => e.id),
      [body.id],
    );
    const { rows } = await database(test).query("SELECT * FROM secrets WHERE owner_kind = 'webhook' AND owner_id = $1", [body.id]);
    t.equal(rows.length, 1, 'one secret in the vault');
    t.notOk(JSON.stringify(rows).includes(body.secret.slice('whsec_'.length, 20)), 'not in clear');
    t.notOk(JSON.stringify((await database(test).query('SELECT * FROM webhook_endpoints')).rows).includes(body.secret.slice('whsec_'.length, 20)), 'nor with the endpoint');
  });

  t.test('an endpoint URL on a private address is refused at save: 400 webhook_url_refused naming url', async (t) => {
    for (const url of ['https://127.0.0.1/in', 'https://10.1.2.3/', 'https://[::1]/in', 'https://169.254.169.254/latest/meta-data', 'https://localhost/in', 'https://internal.example/in']) {
      const response = await test.call('POST', '/client/webhooks', { body: { url, eventTypes: ['*'] } });
      t.equal(response.statusCode, 400, url);
      t.match(codeOf(response), { code: 'webhook_url_refused', param: 'url' }, url);
    }
    const { id } = await createWebhook(test, { url: PUBLIC_NAME });
    const patched = await test.call('PATCH', `/client/webhooks/${id}`, { body: { url: 'https://internal.example/in' } });
    t.match(codeOf(patched), { code: 'webhook_url_refused', param: 'url' }, 'and when it is changed');
    t.equal((await test.call('GET', `/client/webhooks/${id}`)).json().url, PUBLIC_NAME, 'the change was not made');
  });

  t.test('an endpoint URL must be an absolute https URL without a user name or password: 400 webhook_url_invalid', async (t) => {
    for (const url of ['http://hooks.example.com/in', 'ftp://hooks.example.com/in', 'hooks.example.com/in', 'https://user:secret@hooks.example.com/in']) {
      const response = await test.call('POST', '/client/webhooks', { body: { url, eventTypes: ['*'] } });
      t.match(codeOf(response), { code: 'webhook_url_invalid', param: 'url' }, url);
    }
  });

  t.test('a name that does not resolve yet is accepted: the guard runs again on every attempt', async (t) => {
    const response = await test.call('POST', '/client/webhooks', { body: { url: 'https://not-yet.example.com/in', eventTypes: ['*'] } });
    t.equal(response.statusCode, 201);
  });

  t.test('event types must be public types of the catalogue; "*" stands for every one', async (t) => {
    const unknown = await test.call('POST', '/client/webhooks', { body: { url: PUBLIC_NAME, eventTypes: ['key.created', 'key.exploded'] } });
    t.match(codeOf(unknown), { code: 'unknown_event_type', param: 'eventTypes.1' });
    const internal = await test.call('POST', '/client/webhooks', { body: { url: PUBLIC_NAME, eventTypes: ['management.operation'] } });
    t.match(codeOf(internal), { code: 'unknown_event_type' }, 'an internal type is not offered');
    t.match(codeOf(await test.call('POST', '/client/webhooks', { body: { url: PUBLIC_NAME, eventTypes: [] } })), { code: 'invalid_parameter', param: 'eventTypes' });
    t.same((await createWebhook(test, { url: PUBLIC_NAME, eventTypes: ['key.created', '*'] })).body['eventTypes'], ['*']);
    t.same((await createWebhook(test, { url: PUBLIC_NAME, eventTypes: ['key.created', 'key.created', 'webhook.disabled'] })).body['eventTypes'], ['key.created', 'webhook.disabled']);
  });

  t.test('PATCH changes the URL, description and types, and switches the endpoint off and on', async (t) => {
    const { id } = await createWebhook(test, { url: PUBLIC_NAME, eventTypes: ['key.created'] });
    const changed = await test.call('PATCH', `/client/webhooks/${id}`, { body: { url: 'https://hooks.example.com/v2', description: 'v2', eventTypes: ['key.revoked'] } });
    t.match(changed.json(), { url: 'https://hooks.example.com/v2', description: 'v2', eventTypes: ['key.revoked'], enabled: true });
    const off = (await test.call('PATCH', `/client/webhooks/${id}`, { body: { enabled: false } })).json();
    const owner = (await test.call('GET', '/client/whoami')).json().credential.email as string;
    t.match(off, { enabled: false, disabledReason: `Switched off by ${owner}` });
    t.ok(off.disabledAt);
    const on = (await test.call('PATCH', `/client/webhooks/${id}`, { body: { enabled: true } })).json();
    t.match(on, { enabled: true, disabledReason: null, disabledAt: null });
    t.match(codeOf(await test.call('PATCH', `/client/webhooks/${id}`, { body: {} })), { code: 'invalid_body' }, 'at least one field');
    t.match(
      codeOf(await test.call('PATCH', `/client/webhooks/${id}`, { body: { projectId: test.defaultProjectId } })),
      { code: 'unknown_field', param: 'projectId' },
      'the project is fixed',
    );
  });

  t.test('keys confined to a project see and change only their project’s endpoints; the organisation’s only those that reach every project', async (t) => {
    const other = (await test.call('POST', '/client/projects', { body: { name: 'webhooks elsewhere' } })).json() as { id: string };
    const ofDefault = await createWebhook(test, { url: PUBLIC_NAME, projectId: test.defaultProjectId });
    const ofOther = await createWebhook(test, { url: PUBLIC_NAME, projectId: other.id });
    const ofOrganisation = await createWebhook(test, { url: PUBLIC_NAME });
    const confined = await createKey(test, { name: 'confined', projectId: other.id, scopes: ['webhooks:read', 'webhooks:write'] });
    const wide = await createKey(test, { name: 'wide', projectId: other.id, scopes: ['webhooks:read', 'webhooks:write', 'projects:write'] });

    const listedBy = async (key: string) => ((await test.call('GET', '/client/webhooks?limit=200', { token: key })).json() as { data: Array<{ id: string }> }).data.map((e) => e.id);
    t.same(await listedBy(confined.key), [ofOther.id], 'its own project only');
    const seenWide = await listedBy(wide.key);
    for (const id of [ofDefault.id, ofOther.id, ofOrganisation.id]) t.ok(seenWide.includes(id), 'projects:write sees every one');

    for (const id of [ofDefault.id, ofOrganisation.id]) {
      for (const [method, path] of [
        ['GET', ''],
        ['PATCH', ''],
        ['DELETE', ''],
        ['GET', '/deliveries'],
        ['POST', '/test'],
        ['POST', '/secret/rotate'],
      ] as const) {
        const response = await test.call(method, `/client/webhooks/${id}${path}`, { token: confined.key, ...(method === 'PATCH' ? { body: { description: 'x' } } : {}) });
        t.match([response.statusCode, codeOf(response)], [404, { code: 'webhook_not_found' }], `${method} ${path || '/'} of another project's or the organisation's endpoint`);
      }
    }
    t.equal((await test.call('GET', `/client/webhooks/${ofOther.id}`, { token: confined.key })).statusCode, 200);
    t.match(codeOf(await test.call('GET', `/client/webhooks?projectId=${test.defaultProjectId}`, { token: confined.key })), { code: 'project_not_found' });

    const made = await test.call('POST', '/client/webhooks', { token: confined.key, body: { url: PUBLIC_NAME, eventTypes: ['*'] } });
    t.equal(made.json().projectId, other.id, 'naming no project, a confined key makes an endpoint of its own project');
    const elsewhere = await test.call('POST', '/client/webhooks', { token: confined.key, body: { url: PUBLIC_NAME, eventTypes: ['*'], projectId: test.defaultProjectId } });
    t.match(codeOf(elsewhere), { code: 'project_not_found' }, 'and none of another');
    const ofWide = await test.call('POST', '/client/webhooks', { token: wide.key, body: { url: PUBLIC_NAME, eventTypes: ['*'] } });
    t.equal(ofWide.json().projectId, null, 'a key holding projects:write makes endpoints of the organisation');
  });

  t.test('deleting an endpoint removes it with its deliveries and its secrets', async (t) => {
    const { id } = await createWebhook(test, { url: PUBLIC_NAME });
    await emitKeyCreated(test);
    await deliverDue(test);
    t.equal((await deliveriesOf(test, id)).length, 1);
    const removed = await test.call('DELETE', `/client/webhooks/${id}`);
    t.same(removed.json(), { object: 'ack', ok: true, id });
    t.equal((await test.call('GET', `/client/webhooks/${id}`)).statusCode, 404);
    const db = database(test);
    t.equal((await db.query('SELECT 1 FROM webhook_deliveries WHERE endpoint_id = $1', [id])).rows.length, 0, 'no deliveries');
    t.equal((await db.query("SELECT 1 FROM secrets WHERE owner_kind = 'webhook' AND owner_id = $1", [id])).rows.length, 0, 'no secrets');
  });
});

t.test('an organisation has at most maxEndpointsPerOrganization endpoints: 409 webhook_limit_reached', async (t) => {
  const test = await buildTestApp(t, { outboundLookup: resolving({ 'hooks.example.com': '93.184.216.34' }), plugins: { ...allPlugins(), webhooks: { maxEndpointsPerOrganization: 2 } } });
  await createWebhook(test, { url: PUBLIC_NAME });
  await createWebhook(test, { url: PUBLIC_NAME });
  const third = await test.call('POST', '/client/webhooks', { body: { url: PUBLIC_NAME, eventTypes: ['*'] } });
  t.match([third.statusCode, codeOf(third)], [409, { code: 'webhook_limit_reached' }]);
});

t.test('POST test sends a webhook.test delivery now and answers the outcome; it is kept, never retried', async (t) => {
  const test = await webhookApp(t, { clock: testClock(new Date().toISOString()) });
  const hook = await receiver(t);
  const webhook = await createWebhook(test, { url: hook.url, eventTypes: ['key.created'] });
  const answered = await test.call('POST', `/client/webhooks/${webhook.id}/test`);
  t.equal(answered.statusCode, 200);
  const result = answered.json();
  t.match(result, { object: 'webhook_test', succeeded: true, statusCode: 200, errorKind: null, delivery: { eventType: 'webhook.test', test: true, status: 'succeeded', attemptCount: 1 } });
  t.type(result.durationMs, 'number');
  const payload = verifyDelivery(webhook.secret, await hook.arrived(1));
  t.match(payload, { type: 'webhook.test', organizationId: test.organizationId, projectId: null, data: { webhookId: webhook.id, projectId: null } });
  t.same(
    (await deliveriesOf(test, webhook.id)).map((d) => d.id),
    [result.delivery.id],
  );

  hook.handle((_req, res) => res.writeHead(503).end('not now'));
  const failed = (await test.call('POST', `/client/webhooks/${webhook.id}/test`)).json();
  t.match(failed, { succeeded: false, statusCode: 503, errorKind: 'http_status', delivery: { status: 'failed', nextAttemptAt: null } });
  await deliverDue(test);
  t.equal(hook.requests.length, 2, 'a failed test is not retried');
  t.equal((await test.call('GET', `/client/webhooks/${webhook.id}`)).json().enabled, true);
});

t.test('resend sends a finished delivery again with the same webhook-id and body; attempts go on counting', async (t) => {
  const clock = testClock(new Date().toISOString());
  const test = await webhookApp(t, { clock, webhooks: { retryScheduleSeconds: [] } });
  const hook = await receiver(t);
  hook.handle((_req, res) => res.writeHead(500).end());
  const webhook = await createWebhook(test, { url: hook.url, eventTypes: ['key.created'] });
  await emitKeyCreated(test);
  await deliverDue(test);
  const [failed] = await deliveriesOf(test, webhook.id);
  t.match(failed, { status: 'failed', attemptCount: 1 }, 'with no retries scheduled, one attempt ends it');

  hook.handle((_req, res) => res.writeHead(200).end());
  const resent = await test.call('POST', `/client/webhooks/${webhook.id}/deliveries/${failed!.id}/resend`);
  t.equal(resent.statusCode, 202);
  t.match(resent.json(), { id: failed!.id, status: 'pending', attemptCount: 1 });
  t.match(codeOf(await test.call('POST', `/client/webhooks/${webhook.id}/deliveries/${failed!.id}/resend`)), { code: 'delivery_pending' }, 'not while it is pending');
  await deliverDue(test);
  const [done] = await deliveriesOf(test, webhook.id);
  t.match(done, { status: 'succeeded', attemptCount: 2 });
  t.same(
    done!.attempts.map((a) => [a.attempt, a.statusCode]),
    [
      [2, 200],
      [1, 500],
    ],
  );
  const [first, second] = hook.requests;
  t.equal(second?.headers['webhook-id'], first?.headers['webhook-id'], 'the same webhook-id');
  t.equal(second?.body, first?.body, 'the same body');

  t.match(codeOf(await test.call('POST', `/client/webhooks/${webhook.id}/deliveries/00000000-0000-4000-8000-000000000000/resend`)), { code: 'delivery_not_found' });
  await test.call('PATCH', `/client/webhooks/${webhook.id}`, { body: { enabled: false } });
  t.match(codeOf(await test.call('POST', `/client/webhooks/${webhook.id}/deliveries/${failed!.id}/resend`)), { code: 'webhook_disabled' }, 'not to an endpoint switched off');
});

t.test('a switched-off endpoint gets nothing: a pending delivery is cancelled when its attempt comes due', async (t) => {
  const clock = testClock(new Date().toISOString());
  const test = await webhookApp(t, { clock });
  const hook = await receiver(t);
  hook.handle((_req, res) => res.writeHead(500).end());
  const webhook = await createWebhook(test, { url: hook.url, eventTypes: ['key.created'] });
  await emitKeyCreated(test);
  await deliverDue(test);
  await test.call('PATCH', `/client/webhooks/${webhook.id}`, { body: { enabled: false } });
  clock.advance(5_000);
  await emitKeyCreated(test);
  await deliverDue(test);
  t.equal(hook.requests.length, 1, 'neither the retry nor the new event was sent');
  t.same(
    (await deliveriesOf(test, webhook.id)).map((d) => [d.status, d.attemptCount]),
    [['cancelled', 1]],
    'the pending one cancelled; no delivery made for the new event',
  );
});

t.test('rotating the secret answers a new one once; with an overlap both sign until it ends, without one only the new', async (t) => {
  const clock = testClock(new Date().toISOString());
  const test = await webhookApp(t, { clock });
  const hook = await receiver(t);
  const webhook = await createWebhook(test, { url: hook.url, eventTypes: ['key.created'] });

  const rotated = await test.call('POST', `/client/webhooks/${webhook.id}/secret/rotate`, { body: { overlapSeconds: 3_600 } });
  t.equal(rotated.statusCode, 200);
  const overlapped = rotated.json() as { secret: string; previousSecretExpiresAt: string };
  t.match(overlapped, { object: 'webhook_secret', webhookId: webhook.id, previousSecretExpiresAt: new Date(clock().getTime() + 3_600_000).toISOString() });
  t.not(overlapped.secret, webhook.secret);
  t.notOk((await test.call('GET', `/client/webhooks/${webhook.id}`)).body.includes(overlapped.secret), 'get does not show it');

  await emitKeyCreated(test);
  await deliverDue(test);
  const during = await hook.arrived(1);
  t.equal(String(during.headers['webhook-signature']).split(' ').length, 2, 'two v1 signatures');
  t.ok(verifyDelivery(overlapped.secret, during), 'the new secret verifies');
  t.ok(verifyDelivery(webhook.secret, during), 'the previous one too, during the overlap');

  clock.advance(3_600_000);
  await emitKeyCreated(test);
  await deliverDue(test);
  const after = await hook.arrived(2);
  t.equal(String(after.headers['webhook-signature']).split(' ').length, 1, 'one signature once the overlap ended');
  t.ok(verifyDelivery(overlapped.secret, after, clock()));
  t.throws(() => verifyDelivery(webhook.secret, after, clock()), /signature/i);

  const immediate = (await test.call('POST', `/client/webhooks/${webhook.id}/secret/rotate`)).json() as { secret: string; previousSecretExpiresAt: string | null };
  t.equal(immediate.previousSecretExpiresAt, null, 'no overlap: the previous stops at once');
  await emitKeyCreated(test);
  await deliverDue(test);
  const next = await hook.arrived(3);
  t.ok(verifyDelivery(immediate.secret, next, clock()));
  t.throws(() => verifyDelivery(overlapped.secret, next, clock()), /signature/i);
});

t.test('the prune deletes deliveries older than the retention, with their attempts', async (t) => {
  const clock = testClock(new Date().toISOString());
  // The owner's session outlives the month the clock moves.
  const test = await webhookApp(t, { clock, config: { auth: { sessionTtlDays: 365 } }, webhooks: { retentionDays: 30 } });
  const hook = await receiver(t);
  const webhook = await createWebhook(test, { url: hook.url, eventTypes: ['key.created'] });
  await emitKeyCreated(test);
  await deliverDue(test);
  clock.advance(29 * 86_400_000);
  await emitKeyCreated(test);
  await deliverDue(test);
  t.equal((await deliveriesOf(test, webhook.id)).length, 2);
  clock.advance(2 * 86_400_000);
  await deliverDue(test);
  const left = await deliveriesOf(test, webhook.id);
  t.equal(left.length, 1, 'the one made 31 days ago is gone');
  const { rows } = await database(test).query('SELECT count(*)::int AS n FROM webhook_attempts');
  t.equal(rows[0]?.['n'], 1, 'and its attempt');
});
