import t from 'tap';
import { SqlMailOutbox } from '../../../adapters/sql/mail-outbox.ts';
import { Tokens } from '../../../core/kernel/di-tokens.ts';
import { SupportTokens } from '../../../plugins/support/index.ts';
import { SupportDesk } from '../../../plugins/support/support-desk.ts';
import { newJobOf } from '../../../core/jobs/job-queue.ts';
import { sqlKernelStores } from '../../../composition/sql-kernel-stores.ts';
import { addPerson, buildTestApp, createKey } from '../../helpers/app.ts';
import { otherOrganization, postForm } from './support-helpers.ts';

/**
 * Support requests: people open them with attachments and talk with support, who answer from the
 * operator's desk (the CLI's functions); the requester is mailed the answer. Requests belong to one
 * organisation; a member sees their own, owners and admins every one.
 */
t.setTimeout(180_000);
const test = await buildTestApp(t, { plugins: { account: {}, projects: {}, keys: {}, audit: {}, support: { attachments: { maxFiles: 2, maxFileBytes: 64 * 1024 } } } });
const container = test.app.svc.container;
const db = container.resolve(Tokens.Database);
const desk = new SupportDesk({
  db,
  store: container.resolve(SupportTokens.Store),
  // What the operator CLI does (composition/operator-storage.ts): the job is written in the act's transaction.
  enqueue: async (tx, queue, payload) => void (await sqlKernelStores.jobs(db).enqueue(tx, newJobOf(queue, payload, {}, new Date()))),
  clock: () => new Date(),
});
const outbox = new SqlMailOutbox(db, test.config.mail.from);
const png = Buffer.from('89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c489', 'hex');

const eventsOf = async (type: string, subject: string) =>
  (await db.query<{ data: unknown }>('SELECT data FROM events WHERE type = $1 AND subject = $2 ORDER BY occurred_at', [type, subject])).rows.map(
    (row) => (typeof row.data === 'string' ? JSON.parse(row.data) : row.data) as Record<string, unknown>,
  );

async function open(token: string, subject = 'Invoice shows the wrong company', files: Array<{ bytes: Buffer; filename: string; type?: string }> = []) {
  const response = await postForm(test, '/client/support/requests', { subject, message: 'The March invoice names Acme Ltd; we are Acme GmbH.', attachments: files }, token);
  if (response.statusCode !== 201) throw new Error(`open failed: ${response.statusCode} ${response.body}`);
  return response.json() as { id: string; status: string; messages: Array<{ id: string; attachments: Array<{ id: string; contentType: string; filename: string; size: number }> }> };
}

t.test('a person opens a request with a subject, a message and an attachment, and reads it back', async (t) => {
  const created = await open(test.ownerToken, 'Invoice shows the wrong company', [{ bytes: png, filename: 'screenshot.png', type: 'image/png' }]);
  t.equal(created.status, 'open');
  t.match(created, { object: 'support_request', subject: 'Invoice shows the wrong company', messageCount: 1, requester: { email: 'owner@example.com' } });
  const [first] = created.messages;
  t.match(first, { author: { kind: 'person' }, body: 'The March invoice names Acme Ltd; we are Acme GmbH.' });
  t.match(first?.attachments, [{ filename: 'screenshot.png', contentType: 'image/png', size: png.length }]);
  const read = await test.call('GET', `/platform/v1/support/requests/${created.id}`);
  t.equal(read.statusCode, 200);
  t.same(read.json(), created, 'the same request on the regional surface');
  const events = await eventsOf('support.request_opened', created.id);
  t.match(events, [{ requestId: created.id, status: 'open', attachments: 1 }]);
});

t.test('an attachment downloads as an attachment, never sniffed, with its type read from its bytes', async (t) => {
  const page = Buffer.from('<html><script>alert(document.cookie)</script></html>');
  const created = await open(test.ownerToken, 'A page', [{ bytes: page, filename: 'evil.html', type: 'text/html' }]);
  const attachment = created.messages[0]!.attachments[0]!;
  t.equal(attachment.contentType, 'text/plain; charset=utf-8', 'an HTML page is stored as text');
  const record = await test.call('GET', `/client/support/attachments/${attachment.id}`);
  t.equal(record.statusCode, 200);
  t.match(record.json(), { object: 'support_attachment', id: attachment.id, filename: 'evil.html' }, 'JSON by default: its record');
  const file = await test.call('GET', `/client/support/attachments/${attachment.id}`, { headers: { accept: 'application/octet-stream' } });
  t.equal(file.statusCode, 200);
  t.ok(file.rawPayload.equals(page), 'the bytes as uploaded');
  t.equal(file.headers['content-type'], 'text/plain; charset=utf-8');
  t.match(String(file.headers['content-disposition']), /^attachment; filename="evil\.html"; filename\*=UTF-8''evil\.html$/);
  t.equal(file.headers['x-content-type-options'], 'nosniff');
  t.match(String(file.headers['content-security-policy']), /sandbox/);
  t.equal(file.headers['cache-control'], 'private, no-store');
});

t.test("another organisation's request and attachment are 404", async (t) => {
  const created = await open(test.ownerToken, 'Ours', [{ bytes: png, filename: 'a.png' }]);
  const other = await otherOrganization(test, 'Globex');
  for (const [url, code] of [
    [`/client/support/requests/${created.id}`, 'support_request_not_found'],
    [`/client/support/attachments/${created.messages[0]!.attachments[0]!.id}`, 'support_attachment_not_found'],
  ] as const) {
    const refused = await test.call('GET', url, { token: other.ownerToken });
    t.equal(refused.statusCode, 404, url);
    t.equal(refused.json().error.code, code);
  }
  const reply = await test.call('POST', `/client/support/requests/${created.id}/messages`, { token: other.ownerToken, body: { message: 'hello?' } });
  t.equal(reply.statusCode, 404);
  t.equal((await test.call('POST', `/client/support/requests/${created.id}/solve`, { token: other.ownerToken })).statusCode, 404);
  t.same((await test.call('GET', '/client/support/requests', { token: other.ownerToken })).json().data, [], 'their list is empty');
});

t.test('a member sees their own requests only; an admin sees every request of the organisation', async (t) => {
  const member = await addPerson(test, { role: 'member' });
  const colleague = await addPerson(test, { role: 'member' });
  const admin = await addPerson(test, { role: 'admin' });
  const mine = await open(member.token, 'Mine');
  const theirs = await open(colleague.token, 'Theirs');
  const listed = (token: string) => test.call('GET', '/client/support/requests?limit=200', { token }).then((r) => (r.json().data as Array<{ id: string }>).map((item) => item.id));
  t.same(await listed(member.token), [mine.id]);
  t.equal((await test.call('GET', `/client/support/requests/${theirs.id}`, { token: member.token })).statusCode, 404, "a colleague's request is not found");
  const all = await listed(admin.token);
  t.ok(all.includes(mine.id) && all.includes(theirs.id), 'the admin sees both');
  t.equal((await test.call('POST', `/client/support/requests/${theirs.id}/messages`, { token: admin.token, body: { message: 'On it' } })).statusCode, 201);
});

t.test('an API key is refused: support requests are a person’s (403 person_required)', async (t) => {
  const { key } = await createKey(test, { name: 'not a person', scopes: ['inference', 'keys:read', 'usage:read'] });
  for (const [method, url] of [
    ['GET', '/client/support/requests'],
    ['POST', '/client/support/requests'],
  ] as const) {
    const refused = await test.call(method, url, { token: key, ...(method === 'POST' ? { body: { subject: 's', message: 'm' } } : {}) });
    t.equal(refused.statusCode, 403, `${method} ${url}`);
    t.equal(refused.json().error.code, 'person_required');
  }
  const blobsBefore = (await db.query<{ n: number }>('SELECT count(*)::int AS n FROM blobs')).rows[0]!.n;
  const upload = await postForm(test, '/client/support/requests', { subject: 's', message: 'm', attachments: [{ bytes: png, filename: 'a.png' }] }, key);
  t.equal(upload.json().error.code, 'person_required', 'refused before any file is stored');
  t.equal((await db.query<{ n: number }>('SELECT count(*)::int AS n FROM blobs')).rows[0]!.n, blobsBefore);
});

t.test('a request also opens as JSON, without files', async (t) => {
  const response = await test.call('POST', '/client/support/requests', { body: { subject: '  Rate limits  ', message: 'Can we raise them?' } });
  t.equal(response.statusCode, 201);
  t.match(response.json(), { subject: 'Rate limits', messages: [{ attachments: [] }] });
  const unknown = await test.call('POST', '/client/support/requests', { body: { subject: 's', message: 'm', priority: 'urgent' } });
  t.equal(unknown.statusCode, 400);
  t.match(unknown.json().error, { code: 'unknown_field', param: 'priority' });
});

t.test('attachments over the limits are refused with 413 naming the field, and nothing is kept', async (t) => {
  const count = async () => (await db.query<{ n: number }>('SELECT count(*)::int AS n FROM blobs')).rows[0]!.n;
  const before = await count();
  const big = await postForm(test, '/client/support/requests', {
    subject: 's',
    message: 'm',
    attachments: [
      { bytes: png, filename: 'ok.png' },
      { bytes: Buffer.alloc(65 * 1024, 1), filename: 'big.bin' },
    ],
  });
  t.equal(big.statusCode, 413);
  t.match(big.json().error, { code: 'request_too_large', param: 'attachments' });
  const many = await postForm(test, '/client/support/requests', { subject: 's', message: 'm', attachments: [1, 2, 3].map((n) => ({ bytes: png, filename: `${n}.png` })) });
  t.equal(many.statusCode, 413);
  const elsewhere = await postForm(test, '/client/support/requests', { subject: 's', message: 'm', file: { bytes: png, filename: 'a.png' } });
  t.equal(elsewhere.statusCode, 400);
  t.match(elsewhere.json().error, { code: 'unknown_field', param: 'file' });
  const invalid = await postForm(test, '/client/support/requests', { subject: '', message: 'm', attachments: [{ bytes: png, filename: 'a.png' }] });
  t.equal(invalid.statusCode, 400, 'a body its schema refuses');
  t.equal(await count(), before, 'no blob left behind by any of them');
});

t.test("support's reply through the operator desk answers the request, emits support.request_answered and mails the requester", async (t) => {
  const person = await addPerson(test, { role: 'member', email: 'ada@example.com', name: 'Ada' });
  const created = await open(person.token, 'Webhook deliveries fail');
  const waiting = async () => (await desk.list({ limit: 500 })).map((request) => request.id);
  t.ok((await waiting()).includes(created.id), 'it waits in the open queue');
  const replied = await desk.reply({ requestId: created.id, body: 'Your endpoint answers 301; point it at the final URL.', operator: 'Sam' });
  t.ok(replied);
  await test.app.svc.workers.runUntilIdle();
  const read = (await test.call('GET', `/client/support/requests/${created.id}`, { token: person.token })).json();
  t.equal(read.status, 'answered');
  t.match(read.messages.at(-1), { author: { kind: 'support', id: null, name: 'Sam' }, body: 'Your endpoint answers 301; point it at the final URL.' });
  t.match(await eventsOf('support.request_answered', created.id), [{ requestId: created.id, status: 'answered', messageId: replied!.messageId }]);
  const mails = await outbox.read({ to: 'ada@example.com' });
  t.equal(mails.length, 1, 'one mail to the requester');
  t.match(mails[0], { subject: 'Re: Webhook deliveries fail', text: /Sam from support answered[\s\S]*Your endpoint answers 301/ });
  t.notOk((await waiting()).includes(created.id), 'it no longer waits on support');
  t.match(await desk.list({ status: 'answered' }), [{ id: created.id }]);
});

t.test('the requester marks a request solved (once), and a new message reopens it', async (t) => {
  const person = await addPerson(test, { role: 'member' });
  const created = await open(person.token, 'Solved soon');
  const solved = await test.call('POST', `/client/support/requests/${created.id}/solve`, { token: person.token });
  t.equal(solved.statusCode, 200);
  t.match(solved.json(), { status: 'solved', solvedAt: /^\d{4}-/ });
  t.equal((await test.call('POST', `/client/support/requests/${created.id}/solve`, { token: person.token })).json().status, 'solved', 'again: unchanged');
  t.match(await eventsOf('support.request_solved', created.id), [{ solvedBy: 'customer' }], 'one event');
  const again = await postForm(test, `/client/support/requests/${created.id}/messages`, { message: 'It happened again', attachments: [{ bytes: png, filename: 'again.png' }] }, person.token);
  t.equal(again.statusCode, 201);
  t.match(again.json(), { object: 'support_message', attachments: [{ filename: 'again.png' }] });
  t.match((await test.call('GET', `/client/support/requests/${created.id}`, { token: person.token })).json(), { status: 'open', solvedAt: null, messageCount: 2 });
  t.equal(await desk.solve({ requestId: created.id, operator: 'Sam' }), true, 'support may solve it too');
  await test.app.svc.workers.runUntilIdle();
  t.match(await eventsOf('support.request_solved', created.id), [{ solvedBy: 'customer' }, { solvedBy: 'support' }]);
});

t.test('a host serving the narrower route set has no support route (they are wide)', async (t) => {
  const narrow = await buildTestApp(t, { plugins: { account: {}, support: {} }, config: { server: { routeSet: 'narrow' } } });
  for (const url of ['/client/support/requests', '/platform/v1/support/requests']) {
    const response = await narrow.call('GET', url);
    t.equal(response.statusCode, 404, url);
    t.equal(response.json().error.code, 'route_not_found');
  }
});
