import t from 'tap';
import { addPersonTo, createOrganizationWithOwner, issueSession } from '../../../core/identity/identity-admin.ts';
import { Tokens } from '../../../core/kernel/di-tokens.ts';
import { nextInvalidation, realServersConfig, twoReplicasPushingInvalidations } from '../../helpers/app.ts';

const servers = realServersConfig();

t.test(
  'removing a person on one replica cuts their access to the organisation on the other within a second, while their other organisation still works',
  { skip: servers ? false : 'needs TEST_PG_URL and TEST_REDIS_URL (two replicas share the real servers)' },
  async (t) => {
    // Both replicas cache credentials for 60 s: the refusal can only come from the pushed invalidation.
    const [a, b] = await twoReplicasPushingInvalidations(t, servers!);
    const { container } = a.app.svc;
    const db = container.resolve(Tokens.Database);
    const stores = container.resolve(Tokens.Identity);
    const elsewhere = await createOrganizationWithOwner(db, container.resolve(Tokens.IdentityFactory), { name: 'Elsewhere', ownerEmail: 'boss@elsewhere.example', ownerName: 'Boss' });
    const person = await addPersonTo(stores, { organizationId: a.organizationId, email: 'leaving@example.com', name: 'Leaving', role: 'admin' });
    await addPersonTo(stores, { organizationId: elsewhere.organization.id, email: 'leaving@example.com', name: 'Leaving', role: 'member' });
    const { token } = await issueSession(stores, { personId: person.id, ttlDays: 1, now: new Date() });

    const before = await b.call('GET', '/client/employees/invites', { token });
    t.equal(before.statusCode, 200, 'replica B has the session cached, acting here as an admin');

    const heardOnB = await nextInvalidation(b.app);
    const removed = await a.call('DELETE', `/client/employees/${person.id}`);
    t.equal(removed.statusCode, 200, removed.body);
    const started = performance.now();
    await heardOnB();
    const refused = await b.call('GET', '/client/employees/invites', { token });
    const elapsed = performance.now() - started;
    t.equal(refused.statusCode, 403, 'the session no longer acts here as an admin');
    t.ok(elapsed < 1000, `cut on replica B ${Math.round(elapsed)} ms after the removal answered`);

    const whoami = await b.call('GET', '/client/whoami', { token });
    t.equal(whoami.statusCode, 200, 'the session itself goes on');
    t.match(whoami.json(), { account: { id: elsewhere.organization.id }, credential: { role: 'member' } }, 'acting in their other organisation');
    const people = (await b.call('GET', '/client/employees', { token })).json().data as Array<{ id: string }>;
    t.same(people.map((p) => p.id).sort(), [elsewhere.owner.id, person.id].sort(), "the other organisation's people, not this one's");
  },
);
