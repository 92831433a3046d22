import t, { type Test } from 'tap';
import { APIError } from 'openai';
import { type InputGuard, InputGuardsPoint } from '../../core/gateway/input-guards.ts';
import type { Credential } from '../../core/identity/credential.ts';
import { Tokens } from '../../core/kernel/di-tokens.ts';
import { definePlugin } from '../../core/kernel/plugin.ts';
import { generateToken, SESSION_PREFIX } from '../../core/identity/api-tokens.ts';
import { manifest } from '../../plugins/index.ts';
import { MeteringTokens } from '../../plugins/metering/index.ts';
import { allPlugins, buildTestApp, createKey, realServersConfig, type TestApp, type TestAppOptions } from '../helpers/app.ts';
import { eventually } from '../helpers/eventually.ts';
import { startGateway } from '../helpers/gateway.ts';
import { addRule, secondAccount } from './guardrails-fixtures.ts';

t.setTimeout(240_000);

/** Reads the contribution point as the gateway call path does: every guard, once every plugin has registered. */
function guardProbe() {
  const seen: { guards: readonly InputGuard[] } = { guards: [] };
  const plugin = definePlugin({
    name: 'guard-probe',
    description: 'Reads InputGuardsPoint as the call path does',
    dependsOn: ['guardrails'],
    async start({ extensions }) {
      seen.guards = extensions.all(InputGuardsPoint);
    },
  });
  return { plugin, seen };
}

async function appWithProbe(t: Test, options: TestAppOptions = {}) {
  const probe = guardProbe();
  const withProbe = [...manifest, probe.plugin];
  const plugins = { ...allPlugins(manifest), 'guard-probe': {}, ...options.plugins };
  const test = await buildTestApp(t, { ...options, manifest: withProbe, plugins });
  return { test, guards: () => probe.seen.guards };
}

async function keyCredential(test: TestApp, token?: string): Promise<Credential> {
  const { key } = await createKey(test, { name: 'caller', scopes: ['inference'] }, token);
  return test.app.svc.container.resolve(Tokens.Authenticator).authenticate(`Bearer ${key}`);
}

/** The check one guard gives this caller, as the call path asks for it. */
async function checkFor(guard: InputGuard, credential: Credential) {
  return await guard.forCall(credential);
}

t.test('the guard at the InputGuard interface, on a real app and database', async (t) => {
  const { test, guards } = await appWithProbe(t);
  const credential = await keyCredential(test);

  t.test('the plugin contributes exactly one guard to InputGuardsPoint', async (t) => {
    t.equal(guards().length, 1);
  });

  t.test('an account without rules gets no check (the call path does no per-text work)', async (t) => {
    t.equal(await checkFor(guards()[0]!, credential), null);
  });

  t.test('a rule an owner adds applies to the next call at once; disabling the last rule removes the check', async (t) => {
    const guard = guards()[0]!;
    t.equal(await checkFor(guard, credential), null, 'cached: no rules');
    const rule = await addRule(test, { name: 'no emails', detector: 'email', action: 'block' });
    const check = await checkFor(guard, credential);
    t.ok(check, 'a check once a rule exists');
    t.same(check?.check('write to ops@example.com'), { action: 'block', rule: 'no emails' });
    t.same(check?.check('nothing to see'), { action: 'allow' });
    await test.call('PATCH', `/client/guardrails/rules/${rule.id}`, { body: { enabled: false } });
    t.equal(await checkFor(guard, credential), null);
    await test.call('DELETE', `/client/guardrails/rules/${rule.id}`);
  });

  t.test('while cached, the check is given without a promise', async (t) => {
    const guard = guards()[0]!;
    const rule = await addRule(test, { name: 'cards', detector: 'card_number', action: 'redact' });
    t.teardown(() => test.call('DELETE', `/client/guardrails/rules/${rule.id}`));
    await checkFor(guard, credential);
    const again = guard.forCall(credential);
    t.notOk(again instanceof Promise, 'a plain value');
    t.same((again as Exclude<typeof again, Promise<unknown>>)?.check('card 4111-1111-1111-1111 ok'), {
      action: 'redact',
      rule: 'cards',
      text: 'card [REDACTED:card_number] ok',
    });
  });

  t.test('block wins over redact; a card number counts only when Luhn-valid', async (t) => {
    const guard = guards()[0]!;
    const redact = await addRule(test, { name: 'emails', detector: 'email', action: 'redact' });
    const block = await addRule(test, { name: 'cards', detector: 'card_number', action: 'block' });
    t.teardown(async () => {
      await test.call('DELETE', `/client/guardrails/rules/${redact.id}`);
      await test.call('DELETE', `/client/guardrails/rules/${block.id}`);
    });
    const check = await checkFor(guard, credential);
    t.same(check?.check('a@example.com paid with 4242 4242 4242 4242'), { action: 'block', rule: 'cards' });
    t.same(check?.check('a@example.com paid with 4242 4242 4242 4243'), { action: 'redact', rule: 'emails', text: '[REDACTED:email] paid with 4242 4242 4242 4243' });
  });

  t.test("one account's rules do not reach another account's calls", async (t) => {
    const other = await secondAccount(test);
    await addRule(test, { name: 'theirs', detector: 'secret', action: 'block' }, other.ownerToken);
    const theirCaller = await keyCredential(test, other.ownerToken);
    t.ok(await checkFor(guards()[0]!, theirCaller), 'their calls are checked');
    t.equal(await checkFor(guards()[0]!, credential), null, 'ours are not');
  });
});

const servers = realServersConfig();
t.test('a rule written on one replica reaches another long before its cache entry expires', { skip: servers ? false : 'needs TEST_PG_URL and TEST_REDIS_URL' }, async (t) => {
  t.teardown(() => servers!.dropSchema());
  // Rules are cached for 60 s here: a change seen sooner on the other replica can only have been pushed.
  const config = { storage: servers!.storage, bootstrap: { ownerToken: generateToken(SESSION_PREFIX) } };
  const plugins = { guardrails: { cacheTtlMs: 60_000 } };
  const a = await appWithProbe(t, { config, plugins });
  const b = await appWithProbe(t, { config, plugins });
  const credential = await keyCredential(a.test);
  const guardOnB = b.guards()[0]!;
  t.equal(await checkFor(guardOnB, credential), null, 'B has cached that the account has no rules');

  const rule = await addRule(a.test, { name: 'secrets', detector: 'secret', action: 'block' });
  const check = await eventually(() => checkFor(guardOnB, credential), 'replica B to see the new rule', { timeoutMs: 20_000 });
  t.same(check.check('key AKIAIOSFODNN7EXAMPLE'), { action: 'block', rule: 'secrets' });

  await a.test.call('PATCH', `/client/guardrails/rules/${rule.id}`, { body: { action: 'redact' } });
  const redacting = await eventually(
    async () => {
      const latest = await checkFor(guardOnB, credential);
      return latest?.check('key AKIAIOSFODNN7EXAMPLE').action === 'redact' ? latest : null;
    },
    'replica B to see the changed action',
    { timeoutMs: 20_000 },
  );
  t.same(redacting.check('key AKIAIOSFODNN7EXAMPLE'), { action: 'redact', rule: 'secrets', text: 'key [REDACTED:secret]' });
});

// The gateway call path consumes InputGuardsPoint in a change landing beside this one; until both are in, the guard is
// tested above at its interface.
t.test('end to end through POST /v1/chat/completions with the official openai client', async (t) => {
  const g = await startGateway(t);
  const balance = async () => BigInt((await g.test.call('GET', '/client/credits')).json().balanceMicros as string);
  // Bodies would be kept for this account's calls: a blocked call's must not be.
  await g.test.call('POST', '/client/log-requests', { body: { enabled: true } });
  const block = await addRule(g.test, { name: 'no cards', detector: 'card_number', action: 'block' });
  await addRule(g.test, { name: 'secrets', detector: 'secret', action: 'redact' });

  t.test('a blocked call is refused with 422 guardrail_blocked, never reaches the upstream and costs nothing', async (t) => {
    const before = await balance();
    const requestsBefore = g.primary.requests.length;
    const error = await g.client.chat.completions.create({ model: 'solo', messages: [{ role: 'user', content: 'charge 4111 1111 1111 1111 please' }] }).then(
      () => null,
      (caught: unknown) => caught,
    );
    t.ok(error instanceof APIError, 'the client raises an API error');
    t.equal((error as APIError).status, 422);
    t.equal((error as APIError).code, 'guardrail_blocked');
    t.equal(g.primary.requests.length, requestsBefore, 'nothing was sent upstream');
    await g.test.app.svc.workers.runUntilIdle();
    t.equal(await balance(), before, 'nothing was charged');
    await g.test.app.svc.container.resolve(MeteringTokens.Writer).flush();
    const logged = await g.test.call('GET', `/client/requests/${(error as APIError).requestID}`);
    t.match(logged.json(), { status: 422, errorCode: 'guardrail_blocked', costUsd: 0, request: null, response: null });
    t.notMatch(logged.body, '4111', 'the body was not kept');
  });

  t.test('a redacted call goes upstream with the matches replaced', async (t) => {
    await g.test.call('PATCH', `/client/guardrails/rules/${block.id}`, { body: { enabled: false } });
    const completion = await g.client.chat.completions.create({ model: 'solo', messages: [{ role: 'user', content: 'my key is AKIAIOSFODNN7EXAMPLE, ok?' }] });
    t.ok(completion.choices[0]?.message.content);
    const sent = g.primary.requests.at(-1)?.body as { messages: Array<{ content: string }> };
    t.equal(sent.messages[0]?.content, 'my key is [REDACTED:secret], ok?');
  });
});
