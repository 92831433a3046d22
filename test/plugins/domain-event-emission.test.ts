import t, { type Test } from 'tap';
import { eventTypeEntry } from '../../core/events/event-catalogue.ts';
import { Tokens } from '../../core/kernel/di-tokens.ts';
import { addPerson, buildTestApp, createKey, type TestApp } from '../helpers/app.ts';

interface EmittedEvent {
  type: string;
  subject: string | null;
  organizationId: string | null;
  data: Record<string, unknown>;
  actorKind: string | null;
}

/**
 * The public events in the outbox (management.operation, the audit record, is not one of them) of a
 * type or about a subject, sorted by type: events of one transaction share their time, so the
 * outbox keeps no order among them.
 */
async function emitted(test: TestApp, filter: { type?: string; subject?: string }): Promise<EmittedEvent[]> {
  const db = test.app.svc.container.resolve(Tokens.Database);
  const { rows } = await db.query<{ type: string; subject: string | null; organization_id: string | null; data: unknown; actor: unknown }>(
    `SELECT type, subject, organization_id, data, actor FROM events
     WHERE type <> 'management.operation' AND ($1::text IS NULL OR type = $1) AND ($2::text IS NULL OR subject = $2)
     ORDER BY type, occurred_at`,
    [filter.type ?? null, filter.subject ?? null],
  );
  return rows.map((row) => {
    const data = (typeof row.data === 'string' ? JSON.parse(row.data) : row.data) as Record<string, unknown>;
    const actor = (typeof row.actor === 'string' ? JSON.parse(row.actor) : row.actor) as { kind: string } | null;
    return { type: row.type, subject: row.subject, organizationId: row.organization_id, data, actorKind: actor?.kind ?? null };
  });
}

/** Every event's data validates against the schema its type declares. */
function assertDeclaredShape(t: Test, events: EmittedEvent[]) {
  for (const event of events) {
    const parsed = eventTypeEntry(event.type).schema.safeParse(event.data);
    t.ok(parsed.success, `${event.type} matches its declared schema${parsed.success ? '' : `: ${parsed.error.message}`}`);
  }
}

t.test('key events', async (t) => {
  const test = await buildTestApp(t);

  t.test('creating a key emits one key.created, carrying its project and never its secret', async (t) => {
    const created = await createKey(test, { name: 'emitted' });
    const events = await emitted(test, { subject: created.id });
    t.same(
      events.map((e) => e.type),
      ['key.created'],
    );
    t.match(events[0], { organizationId: test.organizationId, actorKind: 'person', data: { keyId: created.id, projectId: test.defaultProjectId, name: 'emitted' } });
    t.notOk(JSON.stringify(events[0]).includes(created.key), 'the plaintext is not in the event');
    assertDeclaredShape(t, events);
  });

  t.test('a refused creation emits nothing', async (t) => {
    const narrow = await createKey(test, { name: 'narrow', scopes: ['keys:write'] });
    const before = (await emitted(test, { type: 'key.created' })).length;
    const refused = await test.call('POST', '/client/keys', { token: narrow.key, body: { name: 'wider', scopes: ['usage:read'] } });
    t.equal(refused.statusCode, 403);
    t.equal((await emitted(test, { type: 'key.created' })).length, before);
  });

  t.test('an update emits one key.updated naming the fields it changed', async (t) => {
    const { id } = await createKey(test, { name: 'to rename' });
    t.equal((await test.call('PATCH', `/client/keys/${id}`, { body: { name: 'renamed' } })).statusCode, 200);
    const events = await emitted(test, { subject: id, type: 'key.updated' });
    t.equal(events.length, 1);
    t.match(events[0]?.data, { keyId: id, name: 'renamed', changed: ['name'] });
    assertDeclaredShape(t, events);
  });

  t.test('pausing a key emits key.updated and key.disabled; pausing it again emits no second key.disabled', async (t) => {
    const { id } = await createKey(test, { name: 'to pause' });
    t.equal((await test.call('PATCH', `/client/keys/${id}`, { body: { disabled: true } })).statusCode, 200);
    t.equal((await test.call('PATCH', `/client/keys/${id}`, { body: { disabled: true } })).statusCode, 200);
    const events = await emitted(test, { subject: id });
    t.same(
      events.map((e) => e.type),
      ['key.created', 'key.disabled', 'key.updated', 'key.updated'],
    );
    t.match(events[1]?.data, { keyId: id, disabled: true });
    assertDeclaredShape(t, events);
  });

  t.test('revoking a key emits one key.revoked; revoking it again and a refused update emit nothing', async (t) => {
    const { id } = await createKey(test, { name: 'to revoke' });
    t.equal((await test.call('DELETE', `/client/keys/${id}`)).statusCode, 200);
    t.equal((await test.call('DELETE', `/client/keys/${id}`)).statusCode, 200);
    const refused = await test.call('PATCH', `/client/keys/${id}`, { body: { disabled: true } });
    t.equal(refused.statusCode, 409, 'a revoked key cannot be paused');
    const events = await emitted(test, { subject: id });
    t.same(
      events.map((e) => e.type),
      ['key.created', 'key.revoked'],
    );
    t.match(events[1]?.data, { keyId: id, deleted: false });
    assertDeclaredShape(t, events);
  });

  t.test('deleting a key for good emits key.revoked with deleted', async (t) => {
    const { id } = await createKey(test, { name: 'to delete' });
    t.equal((await test.call('DELETE', `/client/keys/${id}?permanent=true`)).statusCode, 200);
    const events = await emitted(test, { subject: id, type: 'key.revoked' });
    t.same(
      events.map((e) => e.data['deleted']),
      [true],
    );
  });
});

t.test('payment events', async (t) => {
  const test = await buildTestApp(t);

  t.test('a top-up emits one payment.recorded with the ledger line; a repeated reference emits nothing', async (t) => {
    const first = await test.call('POST', '/client/credits/topup', { body: { amountUsd: 12.5, reference: 'INV-1', note: 'wire' } });
    t.equal(first.statusCode, 201);
    const repeat = await test.call('POST', '/client/credits/topup', { body: { amountUsd: 12.5, reference: 'INV-1' } });
    t.equal(repeat.json().duplicate, true);
    const events = await emitted(test, { type: 'payment.recorded' });
    t.equal(events.length, 1);
    t.match(events[0], {
      subject: first.json().line.id,
      organizationId: test.organizationId,
      data: { ledgerLineId: first.json().line.id, amountMicros: '12500000', reference: 'INV-1', note: 'wire' },
    });
    assertDeclaredShape(t, events);
  });

  t.test("a member's refused top-up emits nothing", async (t) => {
    const before = (await emitted(test, { type: 'payment.recorded' })).length;
    const key = await createKey(test, { name: 'not an owner', scopes: ['usage:read'] });
    const refused = await test.call('POST', '/client/credits/topup', { token: key.key, body: { amountUsd: 1 } });
    t.equal(refused.statusCode, 403);
    t.equal((await emitted(test, { type: 'payment.recorded' })).length, before);
  });
});

t.test('project membership events', async (t) => {
  const test = await buildTestApp(t);
  const project = (await test.call('POST', '/client/projects', { body: { name: 'membership events' } })).json() as { id: string };
  const { personId } = await addPerson(test, { role: 'member' });
  const members = `/client/projects/${project.id}/members`;
  const ofPerson = async () => (await emitted(test, { subject: project.id })).filter((e) => e.data['personId'] === personId);

  t.test('adding a person emits one project.member_added; adding them again with the same role emits nothing', async (t) => {
    t.equal((await test.call('POST', members, { body: { personId, role: 'developer' } })).statusCode, 201);
    t.equal((await test.call('POST', members, { body: { personId, role: 'developer' } })).statusCode, 201);
    const events = await ofPerson();
    t.same(
      events.map((e) => e.type),
      ['project.member_added'],
    );
    t.match(events[0], { organizationId: test.organizationId, data: { projectId: project.id, personId, role: 'developer' } });
    assertDeclaredShape(t, events);
  });

  t.test('changing the role emits one project.member_role_changed with the previous role', async (t) => {
    t.equal((await test.call('PATCH', `${members}/${personId}`, { body: { role: 'admin' } })).statusCode, 200);
    t.equal((await test.call('PATCH', `${members}/${personId}`, { body: { role: 'admin' } })).statusCode, 200);
    const events = (await ofPerson()).filter((e) => e.type === 'project.member_role_changed');
    t.equal(events.length, 1);
    t.match(events[0]?.data, { role: 'admin', previousRole: 'developer' });
    assertDeclaredShape(t, events);
  });

  t.test('removing the member emits one project.member_removed; removing them again is refused and emits nothing', async (t) => {
    t.equal((await test.call('DELETE', `${members}/${personId}`)).statusCode, 200);
    t.equal((await test.call('DELETE', `${members}/${personId}`)).statusCode, 404);
    const events = (await ofPerson()).filter((e) => e.type === 'project.member_removed');
    t.equal(events.length, 1);
    t.match(events[0]?.data, { projectId: project.id, personId, role: 'admin' });
    assertDeclaredShape(t, events);
  });

  t.test('the person who creates a project is its first member', async (t) => {
    const created = (await test.call('POST', '/client/projects', { body: { name: 'created by the owner' } })).json() as { id: string };
    const events = await emitted(test, { subject: created.id, type: 'project.member_added' });
    t.equal(events.length, 1);
    t.match(events[0]?.data, { projectId: created.id, role: 'admin' });
  });
});
