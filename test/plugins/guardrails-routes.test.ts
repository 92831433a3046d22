import t from 'tap';
import { addPerson, buildTestApp, createKey, type TestApp } from '../helpers/app.ts';
import { assertEnvelope } from '../helpers/envelope.ts';
import { addRule as addAccountRule, secondAccount } from './guardrails-fixtures.ts';

t.setTimeout(240_000);

interface RuleView {
  object: string;
  id: string;
  name: string;
  detector: string;
  pattern: string | null;
  action: string;
  enabled: boolean;
  createdAt: string;
  updatedAt: string;
}

const test = await buildTestApp(t);

async function addRule(app: TestApp, body: Record<string, unknown>, token?: string): Promise<RuleView> {
  return (await addAccountRule(app, body, token)) as RuleView;
}

async function rules(app: TestApp = test): Promise<RuleView[]> {
  const response = await app.call('GET', '/client/guardrails');
  if (response.statusCode !== 200) throw new Error(`rules: ${response.statusCode} ${response.body}`);
  return response.json().rules;
}

async function deleteAll(app: TestApp = test): Promise<void> {
  for (const rule of await rules(app)) await app.call('DELETE', `/client/guardrails/rules/${rule.id}`);
}

t.test('an account starts with no rules', async (t) => {
  const response = await test.call('GET', '/client/guardrails');
  t.equal(response.statusCode, 200);
  t.same(response.json(), { object: 'guardrails', rules: [], maxRules: 50 });
});

t.test('an owner adds a rule and reads it back, enabled by default', async (t) => {
  t.teardown(() => deleteAll());
  const created = await addRule(test, { name: 'no card numbers', detector: 'card_number', action: 'block' });
  t.match(created, { object: 'guardrail_rule', name: 'no card numbers', detector: 'card_number', pattern: null, action: 'block', enabled: true });
  t.match(created.id, /^[0-9a-f-]{36}$/);
  t.equal(created.createdAt, created.updatedAt);
  t.same(await rules(), [created]);
});

t.test('a pattern rule keeps its pattern; rules are listed in the order they were made', async (t) => {
  t.teardown(() => deleteAll());
  const first = await addRule(test, { name: 'emails', detector: 'email', action: 'redact', enabled: false });
  const second = await addRule(test, { name: 'codename', detector: 'pattern', pattern: '(?i)project falcon', action: 'block' });
  t.equal(second.pattern, '(?i)project falcon');
  t.same(
    (await rules()).map((rule) => [rule.id, rule.enabled]),
    [
      [first.id, false],
      [second.id, true],
    ],
  );
});

t.test('a pattern RE2 cannot run is refused with 400 naming the pattern', async (t) => {
  for (const pattern of ['(unclosed', '(?<=x)y', 'a*']) {
    const response = await test.call('POST', '/client/guardrails/rules', { body: { name: 'bad', detector: 'pattern', pattern, action: 'block' } });
    assertEnvelope(t, response, 400, { code: 'invalid_pattern', param: 'pattern' });
  }
  t.same(await rules(), []);
});

t.test('a pattern longer than 500 characters is refused', async (t) => {
  const response = await test.call('POST', '/client/guardrails/rules', { body: { name: 'long', detector: 'pattern', pattern: 'a'.repeat(501), action: 'block' } });
  assertEnvelope(t, response, 400, { code: 'invalid_parameter', param: 'pattern' });
});

t.test('the pattern detector needs a pattern, and a built-in detector takes none', async (t) => {
  const missing = await test.call('POST', '/client/guardrails/rules', { body: { name: 'p', detector: 'pattern', action: 'block' } });
  assertEnvelope(t, missing, 400, { code: 'invalid_parameter', param: 'pattern' });
  const extra = await test.call('POST', '/client/guardrails/rules', { body: { name: 'e', detector: 'email', pattern: 'x', action: 'block' } });
  assertEnvelope(t, extra, 400, { code: 'invalid_parameter', param: 'pattern' });
});

t.test('an unknown detector or action is refused naming the field', async (t) => {
  const detector = await test.call('POST', '/client/guardrails/rules', { body: { name: 'x', detector: 'phone', action: 'block' } });
  assertEnvelope(t, detector, 400, { code: 'invalid_parameter', param: 'detector' });
  const action = await test.call('POST', '/client/guardrails/rules', { body: { name: 'x', detector: 'email', action: 'warn' } });
  assertEnvelope(t, action, 400, { code: 'invalid_parameter', param: 'action' });
});

t.test('bodies are strict: an unknown field is refused naming it', async (t) => {
  const create = await test.call('POST', '/client/guardrails/rules', { body: { name: 'x', detector: 'email', action: 'block', severity: 'high' } });
  assertEnvelope(t, create, 400, { code: 'unknown_field', param: 'severity' });
  const tryOut = await test.call('POST', '/client/guardrails/test', { body: { text: 'hi', verbose: true } });
  assertEnvelope(t, tryOut, 400, { code: 'unknown_field', param: 'verbose' });
});

t.test('two rules of one account cannot share a name', async (t) => {
  t.teardown(() => deleteAll());
  await addRule(test, { name: 'cards', detector: 'card_number', action: 'block' });
  const again = await test.call('POST', '/client/guardrails/rules', { body: { name: 'cards', detector: 'email', action: 'redact' } });
  assertEnvelope(t, again, 409, { code: 'guardrail_rule_name_taken', param: 'name' });
  const other = await addRule(test, { name: 'emails', detector: 'email', action: 'redact' });
  const renamed = await test.call('PATCH', `/client/guardrails/rules/${other.id}`, { body: { name: 'cards' } });
  assertEnvelope(t, renamed, 409, { code: 'guardrail_rule_name_taken', param: 'name' });
});

t.test('PATCH changes the action, the enabled flag, the name and a pattern', async (t) => {
  t.teardown(() => deleteAll());
  const rule = await addRule(test, { name: 'codename', detector: 'pattern', pattern: 'falcon', action: 'block' });
  const response = await test.call('PATCH', `/client/guardrails/rules/${rule.id}`, { body: { action: 'redact', enabled: false, name: 'bird', pattern: 'hawk|falcon' } });
  t.equal(response.statusCode, 200);
  t.match(response.json(), { id: rule.id, name: 'bird', pattern: 'hawk|falcon', action: 'redact', enabled: false, detector: 'pattern' });
  t.same(await rules(), [response.json()]);
});

t.test("PATCH refuses a pattern for a built-in detector, a bad pattern, and changing a rule's detector", async (t) => {
  t.teardown(() => deleteAll());
  const builtIn = await addRule(test, { name: 'emails', detector: 'email', action: 'block' });
  assertEnvelope(t, await test.call('PATCH', `/client/guardrails/rules/${builtIn.id}`, { body: { pattern: 'x' } }), 400, { code: 'invalid_parameter', param: 'pattern' });
  assertEnvelope(t, await test.call('PATCH', `/client/guardrails/rules/${builtIn.id}`, { body: { detector: 'secret' } }), 400, { code: 'unknown_field', param: 'detector' });
  const custom = await addRule(test, { name: 'custom', detector: 'pattern', pattern: 'x', action: 'block' });
  assertEnvelope(t, await test.call('PATCH', `/client/guardrails/rules/${custom.id}`, { body: { pattern: '(x' } }), 400, { code: 'invalid_pattern', param: 'pattern' });
  assertEnvelope(t, await test.call('PATCH', `/client/guardrails/rules/${custom.id}`, { body: {} }), 400, { code: 'invalid_body' });
});

t.test('DELETE removes a rule; a rule that is not there is 404 on PATCH and DELETE', async (t) => {
  const rule = await addRule(test, { name: 'gone', detector: 'secret', action: 'block' });
  const deleted = await test.call('DELETE', `/client/guardrails/rules/${rule.id}`);
  t.equal(deleted.statusCode, 200);
  t.same(deleted.json(), { object: 'ack', ok: true, id: rule.id, status: 'deleted' });
  t.same(await rules(), []);
  assertEnvelope(t, await test.call('DELETE', `/client/guardrails/rules/${rule.id}`), 404, { code: 'guardrail_rule_not_found' });
  assertEnvelope(t, await test.call('PATCH', `/client/guardrails/rules/${rule.id}`, { body: { enabled: false } }), 404, { code: 'guardrail_rule_not_found' });
});

t.test("another account's rules are neither listed nor reachable: 404 as if they did not exist", async (t) => {
  const other = await secondAccount(test);
  const theirs = await addRule(test, { name: 'theirs', detector: 'email', action: 'block' }, other.ownerToken);
  t.same(await rules(), []);
  assertEnvelope(t, await test.call('PATCH', `/client/guardrails/rules/${theirs.id}`, { body: { enabled: false } }), 404, { code: 'guardrail_rule_not_found' });
  assertEnvelope(t, await test.call('DELETE', `/client/guardrails/rules/${theirs.id}`), 404, { code: 'guardrail_rule_not_found' });
  const stillThere = (await test.call('GET', '/client/guardrails', { token: other.ownerToken })).json().rules;
  t.match(stillThere, [{ id: theirs.id, enabled: true }]);
});

t.test('an account holds at most 50 rules', async (t) => {
  t.teardown(() => deleteAll());
  for (let i = 0; i < 50; i += 1) await addRule(test, { name: `rule ${i}`, detector: 'email', action: 'redact' });
  const response = await test.call('POST', '/client/guardrails/rules', { body: { name: 'one too many', detector: 'email', action: 'redact' } });
  assertEnvelope(t, response, 409, { code: 'guardrail_rules_full' });
});

t.test('who may read and change the rules', async (t) => {
  const rule = await addRule(test, { name: 'cards', detector: 'card_number', action: 'block' });
  t.teardown(() => deleteAll());
  const admin = await addPerson(test, { role: 'admin' });
  const member = await addPerson(test, { role: 'member' });
  const reader = await createKey(test, { name: 'reader', scopes: ['usage:read'] });
  const inferenceOnly = await createKey(test, { name: 'caller', scopes: ['inference'] });
  const everything = await createKey(test, { name: 'broad', scopes: ['usage:read', 'keys:write', 'projects:write'] });

  t.test('members, admins and keys holding usage:read read them and try them', async (t) => {
    for (const token of [member.token, admin.token, reader.key]) {
      const read = await test.call('GET', '/client/guardrails', { token });
      t.equal(read.statusCode, 200);
      t.same(
        read.json().rules.map((r: RuleView) => r.id),
        [rule.id],
      );
      const tried = await test.call('POST', '/client/guardrails/test', { token, body: { text: 'card 4242 4242 4242 4242' } });
      t.equal(tried.statusCode, 200);
      t.equal(tried.json().action, 'block');
    }
  });

  t.test('a key without usage:read may not read them', async (t) => {
    assertEnvelope(t, await test.call('GET', '/client/guardrails', { token: inferenceOnly.key }), 403, { code: 'missing_scope' });
    assertEnvelope(t, await test.call('POST', '/client/guardrails/test', { token: inferenceOnly.key, body: { text: 'x' } }), 403, { code: 'missing_scope' });
  });

  t.test('only an owner changes them: admins, members and API keys get 403', async (t) => {
    for (const token of [admin.token, member.token, reader.key, everything.key]) {
      const create = await test.call('POST', '/client/guardrails/rules', { token, body: { name: `by ${token.slice(0, 12)}`, detector: 'email', action: 'block' } });
      assertEnvelope(t, create, 403, { code: 'owner_required' });
      assertEnvelope(t, await test.call('PATCH', `/client/guardrails/rules/${rule.id}`, { token, body: { enabled: false } }), 403, { code: 'owner_required' });
      assertEnvelope(t, await test.call('DELETE', `/client/guardrails/rules/${rule.id}`, { token }), 403, { code: 'owner_required' });
    }
    t.same(
      (await rules()).map((r) => [r.id, r.enabled]),
      [[rule.id, true]],
      'nothing changed',
    );
  });
});

t.test('POST /client/guardrails/test', async (t) => {
  t.teardown(() => deleteAll());
  await addRule(test, { name: 'emails', detector: 'email', action: 'redact' });
  await addRule(test, { name: 'keys', detector: 'secret', action: 'block' });
  await addRule(test, { name: 'cards', detector: 'card_number', action: 'redact', enabled: false });
  const tryOut = (body: Record<string, unknown>) => test.call('POST', '/client/guardrails/test', { body });

  t.test('a text no enabled rule matches is allowed unchanged (disabled rules do not run)', async (t) => {
    const response = await tryOut({ text: 'pay with 4242 4242 4242 4242' });
    t.equal(response.statusCode, 200);
    t.same(response.json(), { object: 'guardrail_test', action: 'allow', rule: null, text: 'pay with 4242 4242 4242 4242', findings: [] });
  });

  t.test('a redacted text comes back as it would go upstream, with what each rule found', async (t) => {
    const response = await tryOut({ text: 'ask a@example.com or b@example.com' });
    t.match(response.json(), {
      action: 'redact',
      rule: 'emails',
      text: 'ask [REDACTED:email] or [REDACTED:email]',
      findings: [{ name: 'emails', detector: 'email', action: 'redact', matches: 2 }],
    });
    t.match(response.json().findings[0].ruleId, /^[0-9a-f-]{36}$/);
  });

  t.test('a blocked text answers which rule blocked it, and no text', async (t) => {
    const response = await tryOut({ text: 'mail a@example.com the key AKIAIOSFODNN7EXAMPLE' });
    t.match(response.json(), { action: 'block', rule: 'keys', text: null, findings: [{ name: 'keys', action: 'block', matches: 1 }] });
    t.equal(response.json().findings.length, 1, 'redactions never ran');
  });

  t.test("draft rules are tried instead of the account's, and nothing is stored", async (t) => {
    const before = await rules();
    const response = await tryOut({ text: 'Project Falcon ships', rules: [{ name: 'codename', detector: 'pattern', pattern: '(?i)project falcon', action: 'redact' }] });
    t.match(response.json(), { action: 'redact', text: '[REDACTED:codename] ships', findings: [{ ruleId: null, name: 'codename' }] });
    t.same(await rules(), before);
  });

  t.test('a draft pattern RE2 refuses is 400 naming it', async (t) => {
    const response = await tryOut({
      text: 'x',
      rules: [
        { name: 'ok', detector: 'email', action: 'block' },
        { name: 'bad', detector: 'pattern', pattern: '(?=x)', action: 'block' },
      ],
    });
    assertEnvelope(t, response, 400, { code: 'invalid_pattern', param: 'rules.1.pattern' });
  });

  t.test('the sample text is bounded', async (t) => {
    assertEnvelope(t, await tryOut({ text: 'a'.repeat(100_001) }), 400, { code: 'invalid_parameter', param: 'text' });
  });
});

t.test('changes are audited like every management write', async (t) => {
  t.teardown(() => deleteAll());
  const rule = await addRule(test, { name: 'audited', detector: 'email', action: 'block' });
  await test.call('PATCH', `/client/guardrails/rules/${rule.id}`, { body: { action: 'redact' } });
  await test.call('DELETE', `/client/guardrails/rules/${rule.id}`);
  await test.app.svc.workers.runUntilIdle();
  const log = (await test.call('GET', '/client/audit-log?limit=3')).json();
  t.same(
    log.data.map((entry: { operation: string; targetId: string }) => [entry.operation, entry.targetId]),
    [
      ['guardrails.delete', rule.id],
      ['guardrails.update', rule.id],
      ['guardrails.create', rule.id],
    ],
  );
});

t.test('the OpenAPI document describes the routes with their scopes and errors', async (t) => {
  const doc = (await test.call('GET', '/client/openapi.json', { token: null })).json();
  const rulesPath = doc.paths['/guardrails/rules/{id}'];
  t.ok(doc.paths['/guardrails']?.get, 'GET /guardrails');
  t.ok(doc.paths['/guardrails/rules']?.post, 'POST /guardrails/rules');
  t.ok(rulesPath?.patch && rulesPath?.delete, 'PATCH and DELETE /guardrails/rules/{id}');
  t.ok(doc.paths['/guardrails/test']?.post, 'POST /guardrails/test');
  t.ok(doc.components.schemas.GuardrailRule, 'the rule schema is named');
  const documented = JSON.stringify(doc.paths['/guardrails/rules'].post);
  for (const code of ['invalid_pattern', 'guardrail_rule_name_taken', 'guardrail_rules_full', 'owner_required', 'unknown_field']) t.match(documented, code, code);
});
