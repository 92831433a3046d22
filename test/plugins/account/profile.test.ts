import t from 'tap';
import { Tokens } from '../../../core/kernel/di-tokens.ts';
import { addPerson, buildTestApp, createKey } from '../../helpers/app.ts';

const test = await buildTestApp(t);
const identity = test.app.svc.container.resolve(Tokens.Identity);

t.test("a person's session reads their name, sign-in email, default organisation and role", async (t) => {
  const person = await addPerson(test, { role: 'admin', email: 'ada@example.com', name: 'Ada' });
  const response = await test.call('GET', '/client/profile', { token: person.token });
  t.equal(response.statusCode, 200);
  t.match(response.json(), {
    object: 'profile',
    id: person.personId,
    name: 'Ada',
    email: 'ada@example.com',
    defaultOrganizationId: test.organizationId,
    organization: { id: test.organizationId, role: 'admin' },
  });
});

t.test('PATCH /profile changes the name, and GET shows it', async (t) => {
  const person = await addPerson(test, { role: 'member', name: 'Old name' });
  const patched = await test.call('PATCH', '/client/profile', { token: person.token, body: { name: '  Grace Hopper  ' } });
  t.equal(patched.statusCode, 200);
  t.equal(patched.json().name, 'Grace Hopper', 'trimmed');
  t.equal((await test.call('GET', '/client/profile', { token: person.token })).json().name, 'Grace Hopper');
  t.equal((await identity.people.get(person.personId))?.name, 'Grace Hopper', 'stored');
});

t.test('PATCH /profile sets the default organisation, as POST /organizations/default does', async (t) => {
  const person = await addPerson(test, { role: 'member' });
  const patched = await test.call('PATCH', '/client/profile', { token: person.token, body: { defaultOrganizationId: test.organizationId } });
  t.equal(patched.statusCode, 200);
  t.equal(patched.json().defaultOrganizationId, test.organizationId);
  const elsewhere = await test.call('PATCH', '/client/profile', { token: person.token, body: { defaultOrganizationId: '00000000-0000-4000-8000-000000000000' } });
  t.equal(elsewhere.statusCode, 404);
  t.match(elsewhere.json().error, { code: 'organization_not_found', param: 'defaultOrganizationId' });
});

t.test('the email is not changed through the profile: an email field is refused, naming it', async (t) => {
  const person = await addPerson(test, { role: 'member' });
  const response = await test.call('PATCH', '/client/profile', { token: person.token, body: { email: 'new@example.com' } });
  t.equal(response.statusCode, 400);
  t.match(response.json().error, { code: 'unknown_field', param: 'email' });
});

t.test('an empty or blank name is refused', async (t) => {
  for (const name of ['', '   ']) {
    const response = await test.call('PATCH', '/client/profile', { body: { name } });
    t.equal(response.statusCode, 400, JSON.stringify(name));
    t.equal(response.json().error.param, 'name');
  }
});

t.test('an API key is not a person: the profile answers it 403 person_required', async (t) => {
  const { key } = await createKey(test, { scopes: ['inference', 'keys:read'] });
  for (const [method, body] of [
    ['GET', undefined],
    ['PATCH', { name: 'A key' }],
  ] as const) {
    const response = await test.call(method, '/client/profile', { token: key, ...(body ? { body } : {}) });
    t.equal(response.statusCode, 403, method);
    t.equal(response.json().error.code, 'person_required', method);
  }
});
