import t from 'tap';
import { Tokens } from '../../core/kernel/di-tokens.ts';
import { addPerson, buildTestApp, createKey, realServersConfig, type TestApp } from '../helpers/app.ts';
import { reportSkippedBackend } from '../helpers/databases.ts';

interface AuditEntry {
  object: string;
  id: string;
  occurredAt: string;
  operation: string;
  method: string;
  path: string;
  params: Record<string, string>;
  targetId: string | null;
  actor: { kind: string; id: string; label: string };
  credential: { kind: string; id: string };
  outcome: { status: number; succeeded: boolean; code: string | null };
  requestId: string;
}

async function auditLog(test: TestApp, query = ''): Promise<{ data: AuditEntry[]; nextCursor: string | null }> {
  // Entries are written by the audit subscriber once the event is dispatched.
  await test.app.svc.workers.runUntilIdle();
  const response = await test.call('GET', `/client/audit-log${query}`);
  if (response.statusCode !== 200) throw new Error(`audit log: ${response.statusCode} ${response.body}`);
  return response.json();
}

async function ownerIdentity(test: TestApp) {
  const whoami = (await test.call('GET', '/client/whoami')).json();
  return { personId: whoami.credential.personId as string, email: whoami.credential.email as string };
}

const backends: Array<{ name: string; config?: () => Parameters<typeof buildTestApp>[1] }> = [{ name: 'pglite' }];
const servers = realServersConfig();
if (servers) backends.push({ name: 'postgres', config: () => ({ config: { storage: servers.storage } }) });
else reportSkippedBackend('postgres + redis', 'needs TEST_PG_URL and TEST_REDIS_URL: the audit log ran on PGlite only');

for (const backend of backends) {
  t.test(backend.name, async (t) => {
    if (servers && backend.name === 'postgres') t.teardown(() => servers.dropSchema());
    const test = await buildTestApp(t, backend.config?.() ?? {});
    const owner = await ownerIdentity(test);

    t.test('a key created, changed and revoked by the owner shows up newest first, with actor, credential and target', async (t) => {
      const { id } = await createKey(test, { name: 'audited' });
      t.equal((await test.call('PATCH', `/client/keys/${id}`, { body: { name: 'audited, renamed' } })).statusCode, 200);
      t.equal((await test.call('DELETE', `/client/keys/${id}`)).statusCode, 200);
      const { data } = await auditLog(test, `?limit=3`);
      t.same(
        data.map((e) => [e.operation, e.method, e.targetId]),
        [
          ['keys.delete', 'DELETE', id],
          ['keys.update', 'PATCH', id],
          ['keys.create', 'POST', id],
        ],
      );
      for (const entry of data) {
        t.match(entry, {
          object: 'audit_entry',
          actor: { kind: 'person', id: owner.personId, label: owner.email },
          credential: { kind: 'session' },
          outcome: { succeeded: true, code: null },
        });
        t.ok(entry.requestId.startsWith('req_'), 'names the request');
      }
      t.same(
        data.map((e) => e.outcome.status),
        [200, 200, 201],
      );
      t.same(data[0]?.params, { id });
      t.equal(data[0]?.path, '/keys/:id');
    });

    t.test('reads are not listed', async (t) => {
      const before = (await auditLog(test)).data.length;
      await test.call('GET', '/client/keys');
      t.equal((await auditLog(test)).data.length, before);
    });

    t.test('a write that fails is listed with its status and code', async (t) => {
      const missing = '00000000-0000-4000-8000-000000000000';
      t.equal((await test.call('PATCH', `/client/keys/${missing}`, { body: { name: 'ghost' } })).statusCode, 404);
      const [entry] = (await auditLog(test, '?limit=1')).data;
      t.match(entry, { operation: 'keys.update', targetId: missing, outcome: { status: 404, succeeded: false, code: 'key_not_found' } });
    });

    t.test('a write made with an API key is attributed to the key', async (t) => {
      const manager = await createKey(test, { name: 'key manager', scopes: ['keys:write', 'keys:read', 'inference'] });
      const made = await createKey(test, { name: 'made by a key' }, manager.key);
      const [entry] = (await auditLog(test, '?limit=1')).data;
      t.match(entry, {
        operation: 'keys.create',
        targetId: made.id,
        actor: { kind: 'key', id: manager.id, label: 'key manager' },
        credential: { kind: 'key', id: manager.id },
      });
    });

    t.test('filters by operation and by actor, and pages with a cursor', async (t) => {
      const creates = (await auditLog(test, '?operation=keys.create')).data;
      t.ok(creates.length >= 3);
      t.ok(creates.every((e) => e.operation === 'keys.create'));
      const byOwner = (await auditLog(test, `?actorId=${owner.personId}`)).data;
      t.ok(byOwner.length > 0 && byOwner.every((e) => e.actor.id === owner.personId));

      const all = (await auditLog(test, '?limit=200')).data;
      const seen: string[] = [];
      let cursor: string | null = null;
      do {
        const page: { data: AuditEntry[]; nextCursor: string | null } = await auditLog(test, `?limit=2${cursor ? `&cursor=${cursor}` : ''}`);
        t.ok(page.data.length <= 2);
        seen.push(...page.data.map((e) => e.id));
        cursor = page.nextCursor;
      } while (cursor);
      t.same(
        seen,
        all.map((e) => e.id),
        'the pages walk the whole log once, in order',
      );
      const bad = await test.call('GET', '/client/audit-log?cursor=nonsense');
      t.equal(bad.statusCode, 400);
      t.equal(bad.json().error.param, 'cursor');
    });

    t.test('only owners may read it', async (t) => {
      const admin = await addPerson(test, { role: 'admin' });
      const member = await addPerson(test, { role: 'member' });
      const key = await createKey(test, { name: 'reader', scopes: ['keys:read', 'usage:read'] });
      for (const token of [admin.token, member.token, key.key]) {
        const response = await test.call('GET', '/client/audit-log', { token });
        t.equal(response.statusCode, 403);
        t.equal(response.json().error.code, 'owner_required');
      }
    });

    t.test('every entry is written once, even when its delivery runs again', async (t) => {
      // The earlier tests' last writes may still be on their way to the subscriber.
      await test.app.svc.workers.runUntilIdle();
      const db = test.app.svc.container.resolve(Tokens.Database);
      const { rows } = await db.query<{ n: number; distinct_events: number }>('SELECT count(*)::int AS n, count(DISTINCT event_id)::int AS distinct_events FROM audit_log');
      t.equal(rows[0]?.n, rows[0]?.distinct_events);
      const { rows: events } = await db.query<{ n: number }>("SELECT count(*)::int AS n FROM events WHERE type = 'management.operation'");
      t.equal(rows[0]?.n, events[0]?.n, 'one entry per management.operation event');
    });
  });
}
