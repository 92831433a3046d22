import t from 'tap';
import type { InputGuardCheck } from '../../../core/gateway/input-guards.ts';
import { InputGuardsPoint } from '../../../core/gateway/input-guards.ts';
import { definePlugin } from '../../../core/kernel/plugin.ts';
import { startGovernedGateway } from './governed-gateway.ts';

/**
 * The call path's input guards, with a guard contributed by a small plugin of this test: keys
 * named `guarded…` have a check that blocks "SECRET" and redacts one e-mail address; other
 * callers have none.
 */

t.setTimeout(240_000);

let textsChecked = 0;
const check: InputGuardCheck = {
  check(text) {
    textsChecked += 1;
    if (text.includes('SECRET')) return { action: 'block', rule: 'no-secrets' };
    if (text.includes('alice@example.com')) return { action: 'redact', text: text.replaceAll('alice@example.com', '[email]'), rule: 'emails' };
    return { action: 'allow' };
  },
};
const guardPlugin = definePlugin({
  name: 'test-guard',
  description: 'a data guardrail for tests',
  register({ extensions }) {
    extensions.contribute(InputGuardsPoint, { forCall: (credential) => (credential.kind === 'key' && credential.keyName.startsWith('guarded') ? check : null) });
  },
});

const g = await startGovernedGateway(t, [guardPlugin]);
const guarded = await g.newKey({ name: 'guarded key' });
const plain = await g.newKey({ name: 'plain key' });
t.equal((await g.test.call('POST', '/client/log-requests', { body: { enabled: true } })).statusCode, 200, 'bodies are logged for this account');
t.beforeEach(() => {
  g.upstream.reset();
  textsChecked = 0;
});

const chat = (key: string, content: string) =>
  g.test.call('POST', '/v1/chat/completions', { token: key, body: { model: 'solo', messages: [{ role: 'user', content: [{ type: 'text', text: content }] }] } });

t.test('a blocked chat is 422 guardrail_blocked, never sent upstream, logged without body and billed nothing', async (t) => {
  const before = await g.charged();
  const response = await chat(guarded.key, 'my SECRET is 42');
  t.equal(response.statusCode, 422);
  t.equal(response.json().error.code, 'guardrail_blocked');
  t.match(response.json().error.message, /no-secrets/);
  t.equal(g.upstream.requests.length, 0, 'nothing went upstream');
  const requestId = String(response.headers['x-request-id']);
  const row = await g.logRow(requestId);
  t.equal(row.status_code, 422);
  t.equal(row.error_code, 'guardrail_blocked');
  t.equal(BigInt(row.cost_micros), 0n);
  const bodies = await g.db.query('SELECT 1 FROM request_log_bodies WHERE request_id = $1', [requestId]);
  t.equal(bodies.rows.length, 0, 'no body kept');
  t.equal(await g.charged(), before, 'no ledger charge');
});

t.test('a blocked embeddings call is refused the same way', async (t) => {
  const response = await g.test.call('POST', '/v1/embeddings', { token: guarded.key, body: { model: 'embed', input: ['fine', 'a SECRET'] } });
  t.equal(response.statusCode, 422);
  t.equal(response.json().error.code, 'guardrail_blocked');
  t.equal(g.upstream.requests.length, 0);
});

t.test('a redacted text is what goes upstream', async (t) => {
  const response = await chat(guarded.key, 'write to alice@example.com today');
  t.equal(response.statusCode, 200);
  t.same(g.upstream.requests[0]?.body.messages[0].content, [{ type: 'text', text: 'write to [email] today' }]);
  const embedded = await g.test.call('POST', '/v1/embeddings', { token: guarded.key, body: { model: 'embed', input: ['alice@example.com', 'plain'] } });
  t.equal(embedded.statusCode, 200);
  t.same(g.upstream.requests[1]?.body.input, ['[email]', 'plain']);
});

t.test('an image prompt is guarded: blocked before anything goes upstream, redacted in what goes', async (t) => {
  const generate = (prompt: string) => g.test.call('POST', '/v1/images/generations', { token: guarded.key, body: { model: 'painter', prompt } });
  const blocked = await generate('draw my SECRET');
  t.equal(blocked.statusCode, 422);
  t.equal(blocked.json().error.code, 'guardrail_blocked');
  t.equal(g.upstream.requests.length, 0, 'nothing went upstream');
  const redacted = await generate('a portrait of alice@example.com');
  t.equal(redacted.statusCode, 200);
  t.equal(g.upstream.requests[0]?.body.prompt, 'a portrait of [email]');
});

t.test('a caller whose guards have no check for it: no check runs, and its request goes as sent', async (t) => {
  const response = await chat(plain.key, 'my SECRET to alice@example.com');
  t.equal(response.statusCode, 200);
  t.equal(textsChecked, 0, 'no check ran');
  t.same(g.upstream.requests[0]?.body.messages[0].content, [{ type: 'text', text: 'my SECRET to alice@example.com' }]);
});
