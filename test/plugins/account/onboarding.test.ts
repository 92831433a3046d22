import t from 'tap';
import { addPerson, createKey } from '../../helpers/app.ts';
import { accountApp } from './account-app.ts';

// Each test builds its own service (several for the replica and restart tests): more than the default 120 s on a loaded machine.
t.setTimeout(300_000);

type Json = Record<string, any>;

t.test('the checklist follows the real state of the account, step by step', async (t) => {
  const test = await accountApp(t);
  const onboarding = async () => (await test.call('GET', '/client/onboarding')).json() as Json;
  const step = async (id: string) => ((await onboarding()).steps as Json[]).find((s) => s.id === id);

  const fresh = await onboarding();
  t.same(
    fresh.steps.map((s: Json) => [s.id, s.done]),
    [
      ['create_key', false],
      ['first_call', false],
      ['add_credit', false],
      ['invite_teammate', false],
    ],
    'in checklist order, nothing done (the opening credit is no payment)',
  );
  t.match(fresh, { object: 'onboarding', completedSteps: 0, totalSteps: 4, complete: false, dismissed: false, heardFrom: null, details: null });

  const { key } = await createKey(test, { name: 'first' });
  t.match(await step('create_key'), { done: true, doneAt: String });

  const refused = await test.call('POST', '/v1/chat/completions', { token: key, body: { model: 'no-such-model', messages: [{ role: 'user', content: 'hi' }] } });
  t.equal(refused.statusCode, 404);
  await test.flush();
  t.match(await step('first_call'), { done: false }, 'a failed call is not the first call');
  t.equal(await test.chat(key), 200);
  await test.flush();
  t.match(await step('first_call'), { done: true, doneAt: String }, 'a successful /v1 call with the mock provider');

  const topup = await test.call('POST', '/client/credits/topup', { body: { amountUsd: 5, reference: 'onboarding-topup' } });
  t.equal(topup.statusCode, 201);
  t.match(await step('add_credit'), { done: true });

  await addPerson(test, { role: 'member' });
  t.match(await step('invite_teammate'), { done: true });
  t.match(await onboarding(), { completedSteps: 4, complete: true });
});

t.test('heard-from is each person’s own, and answering again replaces it', async (t) => {
  const test = await accountApp(t);
  const other = await addPerson(test, { role: 'member' });
  const answered = await test.call('POST', '/client/onboarding/heard-from', { body: { source: 'friend_or_colleague', detail: '  a colleague at work ' } });
  t.equal(answered.statusCode, 200);
  t.match(answered.json().heardFrom, { source: 'friend_or_colleague', detail: 'a colleague at work', answeredAt: String });
  t.equal((await test.call('GET', '/client/onboarding', { token: other.token })).json().heardFrom, null, 'another person has not answered');
  const again = await test.call('POST', '/client/onboarding/heard-from', { body: { source: 'search' } });
  t.match(again.json().heardFrom, { source: 'search', detail: null });
  const unknown = await test.call('POST', '/client/onboarding/heard-from', { body: { source: 'carrier_pigeon' } });
  t.equal(unknown.statusCode, 400);
  t.equal(unknown.json().error.param, 'source');
});

t.test('skipping hides the checklist from the one who skipped only; dismissed: false brings it back', async (t) => {
  const test = await accountApp(t);
  const other = await addPerson(test, { role: 'admin' });
  const skipped = await test.call('POST', '/client/onboarding/skip');
  t.equal(skipped.statusCode, 200, 'no body needed');
  t.match(skipped.json(), { dismissed: true, dismissedAt: String });
  t.match((await test.call('GET', '/client/onboarding')).json(), { dismissed: true });
  t.match((await test.call('GET', '/client/onboarding', { token: other.token })).json(), { dismissed: false }, 'still shown to a teammate');
  const back = await test.call('POST', '/client/onboarding/skip', { body: { dismissed: false } });
  t.match(back.json(), { dismissed: false, dismissedAt: null });
});

t.test("the details are the organisation's: any person answers, everyone sees them, a later answer replaces them whole", async (t) => {
  const test = await accountApp(t);
  const other = await addPerson(test, { role: 'member' });
  const first = await test.call('POST', '/client/onboarding/details', {
    body: { companyName: 'Acme', companySize: '11-50', useCase: 'agents', useCaseDetail: 'support agents', website: 'https://acme.example' },
  });
  t.equal(first.statusCode, 200);
  t.match(first.json().details, { companyName: 'Acme', companySize: '11-50', useCase: 'agents', useCaseDetail: 'support agents', website: 'https://acme.example' });
  t.match((await test.call('GET', '/client/onboarding', { token: other.token })).json().details, { companyName: 'Acme' }, 'a teammate sees them');
  const second = await test.call('POST', '/client/onboarding/details', { token: other.token, body: { useCase: 'coding' } });
  t.match(second.json().details, { companyName: null, companySize: null, useCase: 'coding', website: null });
  const badSite = await test.call('POST', '/client/onboarding/details', { body: { useCase: 'coding', website: 'javascript:alert(1)' } });
  t.equal(badSite.statusCode, 400);
  t.equal(badSite.json().error.param, 'website');
});

t.test('an API key reads the checklist without answers, and is refused the answers a person gives', async (t) => {
  const test = await accountApp(t);
  const { key } = await createKey(test, { scopes: ['inference'] });
  const read = await test.call('GET', '/client/onboarding', { token: key });
  t.equal(read.statusCode, 200);
  t.match(read.json(), { dismissed: false, heardFrom: null });
  for (const [path, body] of [
    ['/client/onboarding/heard-from', { source: 'search' }],
    ['/client/onboarding/skip', {}],
    ['/client/onboarding/details', { useCase: 'other' }],
  ] as const) {
    const response = await test.call('POST', path, { token: key, body });
    t.equal(response.statusCode, 403, path);
    t.equal(response.json().error.code, 'person_required', path);
  }
});
