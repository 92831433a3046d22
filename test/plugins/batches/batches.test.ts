import t from 'tap';
import OpenAI from 'openai';
import { createKey } from '../../helpers/app.ts';
import { batchGateway, chatLine, fileLines, uploadLines, untilEnded } from '../../helpers/batches.ts';
import { testClock } from '../../helpers/jobs.ts';
import { database } from '../../helpers/webhooks.ts';
import { MeteringTokens } from '../../../plugins/metering/index.ts';

const lines = (count: number, model = 'solo') => Array.from({ length: count }, (_, i) => chatLine(`line-${i + 1}`, model));

t.test('the openai package drives a batch: create, retrieve, list, content', async (t) => {
  const gateway = await batchGateway(t);
  const inputFileId = await uploadLines(gateway, lines(3));
  const created = await gateway.client.batches.create({ input_file_id: inputFileId, endpoint: '/v1/chat/completions', completion_window: '24h', metadata: { run: 'nightly' } });
  t.equal(created.object, 'batch');
  t.equal(created.status, 'in_progress');
  t.same(created.request_counts, { total: 3, completed: 0, failed: 0 });
  t.same(created.metadata, { run: 'nightly' });

  const ended = await untilEnded(gateway, created.id);
  t.equal(ended.status, 'completed');
  t.same(ended.request_counts, { total: 3, completed: 3, failed: 0 });
  t.ok(ended.completed_at && ended.finalizing_at);
  t.equal(ended.error_file_id, null, 'no line failed: no error file');

  const listed = [];
  for await (const batch of gateway.client.batches.list()) listed.push(batch.id);
  t.same(listed, [created.id]);

  const output = await fileLines(gateway, ended.output_file_id!);
  t.same(
    output.map((line) => line.custom_id),
    ['line-1', 'line-2', 'line-3'],
    'one output line per input line, in input order',
  );
  for (const line of output) {
    t.equal(line.response.status_code, 200);
    t.equal(line.response.body.object, 'chat.completion');
    t.equal(line.error, null);
  }
});

t.test('GET /v1/batches/{id}/content is the output file once the batch has ended, 404 before', async (t) => {
  const gateway = await batchGateway(t);
  let release!: () => void;
  const held = new Promise<void>((resolve) => (release = resolve));
  gateway.primary.enqueue({ kind: 'reply', holdUntil: held });
  const id = (await gateway.client.batches.create({ input_file_id: await uploadLines(gateway, lines(1)), endpoint: '/v1/chat/completions', completion_window: '24h' })).id;
  const early = await gateway.test.call('GET', `/v1/batches/${id}/content`, { token: gateway.key });
  t.equal(early.statusCode, 404);
  t.equal(early.json().error.code, 'batch_not_finished');
  release();
  await untilEnded(gateway, id);
  const done = await gateway.test.call('GET', `/v1/batches/${id}/content`, { token: gateway.key });
  t.equal(done.statusCode, 200);
  t.equal(JSON.parse(done.body.trim()).custom_id, 'line-1');
});

t.test('a 1,000-line batch completes with exact counts, one output line per input line, each billed once', async (t) => {
  const gateway = await batchGateway(t, { batches: { lineConcurrency: 16, perOrganizationConcurrency: 16 } });
  const id = (await gateway.client.batches.create({ input_file_id: await uploadLines(gateway, lines(1_000)), endpoint: '/v1/chat/completions', completion_window: '24h' })).id;
  const ended = await untilEnded(gateway, id);
  t.same(ended.request_counts, { total: 1_000, completed: 1_000, failed: 0 });
  const output = await fileLines(gateway, ended.output_file_id!);
  t.equal(output.length, 1_000);
  t.equal(new Set(output.map((line) => line.custom_id)).size, 1_000);
  // A slow answer may be failed over and sent again within one call; each line's calls share its request id.
  const sent = new Set(gateway.primary.requests.map((request) => request.headers['x-client-request-id']));
  t.equal(sent.size, 1_000, 'every line reached the upstream');
  await gateway.test.app.svc.container.resolve(MeteringTokens.Writer).flush();
  const logged = await database(gateway.test).query<{ rows: number; ids: number }>('SELECT count(*)::int AS rows, count(DISTINCT id)::int AS ids FROM request_logs WHERE batch_id = $1', [
    id,
  ]);
  t.same(logged.rows[0], { rows: 1_000, ids: 1_000 }, 'one request-log row per line, marked with its batch');
  const requests = await gateway.test.call('GET', '/client/requests?limit=100', { token: gateway.test.ownerToken });
  const rows = requests.json().data as Array<Record<string, unknown>>;
  t.ok(rows.length > 0 && rows.every((row) => row.batchId === id), 'GET /client/requests shows the batch of each line');
});

t.test('a line that answers 4xx is a failed line in the error file; the batch still completes', async (t) => {
  const gateway = await batchGateway(t);
  gateway.primary.enqueue({ kind: 'status', status: 400, message: 'the upstream refused this one' });
  const ended = await untilEnded(
    gateway,
    (await gateway.client.batches.create({ input_file_id: await uploadLines(gateway, lines(2)), endpoint: '/v1/chat/completions', completion_window: '24h' })).id,
  );
  t.equal(ended.status, 'completed');
  t.same(ended.request_counts, { total: 2, completed: 1, failed: 1 });
  const errors = await fileLines(gateway, ended.error_file_id!);
  t.equal(errors.length, 1);
  t.equal(errors[0]!.response.status_code, 400);
  t.equal(errors[0]!.error, null);
});

t.test('cancelling mid-way stops new lines; lines already running finish and are billed', async (t) => {
  const gateway = await batchGateway(t, { batches: { lineConcurrency: 2, perOrganizationConcurrency: 2 } });
  let release!: () => void;
  const held = new Promise<void>((resolve) => (release = resolve));
  gateway.primary.enqueue({ kind: 'reply', holdUntil: held }, { kind: 'reply', holdUntil: held });
  const id = (await gateway.client.batches.create({ input_file_id: await uploadLines(gateway, lines(10)), endpoint: '/v1/chat/completions', completion_window: '24h' })).id;
  await gateway.primary.arrived(2);
  const cancelling = await gateway.client.batches.cancel(id);
  t.equal(cancelling.status, 'cancelling');
  t.ok(cancelling.cancelling_at);
  release();
  const ended = await untilEnded(gateway, id);
  t.equal(ended.status, 'cancelled');
  t.same(ended.request_counts, { total: 10, completed: 2, failed: 0 });
  t.equal(gateway.primary.requests.length, 2, 'no line started after the cancel');
  t.equal((await fileLines(gateway, ended.output_file_id!)).length, 2);
  const never = await fileLines(gateway, ended.error_file_id!);
  t.equal(never.length, 8);
  t.same(never[0]!.error.code, 'batch_cancelled');
  const again = await gateway.test.call('POST', `/v1/batches/${id}/cancel`, { token: gateway.key });
  t.equal(again.statusCode, 409, 'an ended batch cannot be cancelled');
  t.equal(again.json().error.code, 'batch_not_cancellable');
});

t.test('a batch whose worst case does not fit a blocking cap is refused with 402 up front', async (t) => {
  const gateway = await batchGateway(t);
  // Each line may cost up to 50 output tokens at $2/M plus its input: 100 lines need more than $0.005.
  const { key } = await createKey(gateway.test, { name: 'capped', scopes: ['inference'], spendCap: { usd: 0.005, period: 'month' } });
  const client = new OpenAI({ apiKey: key, baseURL: `${gateway.url}/v1`, maxRetries: 0 });
  const inputFileId = await uploadLines(gateway, lines(100), client);
  const refused = await gateway.test.call('POST', '/v1/batches', { token: key, body: { input_file_id: inputFileId, endpoint: '/v1/chat/completions', completion_window: '24h' } });
  t.equal(refused.statusCode, 402);
  t.equal(refused.json().error.code, 'budget_exceeded');
  const listed = await gateway.test.call('GET', '/v1/batches', { token: key });
  t.same(listed.json().data, [], 'nothing was created');
});

t.test("a live call that fits only without the batch's hold gets 402 while the batch runs, and fits once it ended", async (t) => {
  const gateway = await batchGateway(t, { batches: { lineConcurrency: 1, perOrganizationConcurrency: 1 } });
  const { key } = await createKey(gateway.test, { name: 'capped', scopes: ['inference'], spendCap: { usd: 0.01, period: 'month' } });
  const client = new OpenAI({ apiKey: key, baseURL: `${gateway.url}/v1`, maxRetries: 0 });
  let release!: () => void;
  gateway.primary.enqueue({ kind: 'reply', holdUntil: new Promise<void>((resolve) => (release = resolve)) });
  // 40 lines of at most ~$0.00013 each: about half the cap held.
  const id = (await client.batches.create({ input_file_id: await uploadLines(gateway, lines(40), client), endpoint: '/v1/chat/completions', completion_window: '24h' })).id;
  await gateway.primary.arrived(1);
  const live = { model: 'solo', max_tokens: 3_000, messages: [{ role: 'user', content: 'a live call worth about $0.006' }] };
  const refused = await gateway.test.call('POST', '/v1/chat/completions', { token: key, body: live });
  t.equal(refused.statusCode, 402, 'the hold counts against the cap');
  t.equal(refused.json().error.code, 'budget_exceeded');
  release();
  await untilEnded(gateway, id, client);
  await gateway.test.app.svc.workers.runUntilIdle();
  const fits = await gateway.test.call('POST', '/v1/chat/completions', { token: key, body: live });
  t.equal(fits.statusCode, 200, 'released: what the lines did not spend is back');
});

t.test("another project's key gets 404 for a batch and its file on every route", async (t) => {
  const gateway = await batchGateway(t);
  const id = (await gateway.client.batches.create({ input_file_id: await uploadLines(gateway, lines(1)), endpoint: '/v1/chat/completions', completion_window: '24h' })).id;
  const project = await gateway.test.call('POST', '/client/projects', { token: gateway.test.ownerToken, body: { name: 'Other' } });
  const { key: other } = await createKey(gateway.test, { name: 'other', scopes: ['inference'], projectId: project.json().id });
  for (const [method, url] of [
    ['GET', `/v1/batches/${id}`],
    ['POST', `/v1/batches/${id}/cancel`],
    ['GET', `/v1/batches/${id}/content`],
  ] as const) {
    const answer = await gateway.test.call(method, url, { token: other });
    t.equal(answer.statusCode, 404, `${method} ${url}`);
    t.equal(answer.json().error.code, 'batch_not_found');
  }
  const listed = await gateway.test.call('GET', '/v1/batches', { token: other });
  t.same(listed.json().data, [], "the list holds only the caller's project's batches");
  const batch = await gateway.client.batches.retrieve(id);
  const reuse = await gateway.test.call('POST', '/v1/batches', { token: other, body: { input_file_id: batch.input_file_id, endpoint: '/v1/chat/completions', completion_window: '24h' } });
  t.equal(reuse.statusCode, 404, "another project's file cannot be a batch's input");
});

t.test('polling a batch spends the request-rate allowance', async (t) => {
  const gateway = await batchGateway(t);
  const { key } = await createKey(gateway.test, { name: 'slow poller', scopes: ['inference'], rateLimits: { requestsPerMinute: 3 } });
  const client = new OpenAI({ apiKey: key, baseURL: `${gateway.url}/v1`, maxRetries: 0 });
  const id = (await client.batches.create({ input_file_id: await uploadLines(gateway, lines(1), client), endpoint: '/v1/chat/completions', completion_window: '24h' })).id;
  const statuses: number[] = [];
  const remaining: string[] = [];
  for (let i = 0; i < 4; i += 1) {
    const answer = await gateway.test.call('GET', `/v1/batches/${id}`, { token: key });
    statuses.push(answer.statusCode);
    remaining.push(String(answer.headers['x-ratelimit-remaining-requests']));
  }
  t.same(statuses.slice(0, 3), [200, 200, 200]);
  t.equal(statuses[3], 429, 'the fourth poll in a minute is over a 3/min allowance');
  t.same(remaining.slice(0, 3), ['2', '1', '0']);
});

t.test('a revoked key stops its batch: failed, the lines not yet run never run', async (t) => {
  const gateway = await batchGateway(t, { batches: { lineConcurrency: 1, perOrganizationConcurrency: 1 } });
  const { id: keyId, key } = await createKey(gateway.test, { name: 'short-lived', scopes: ['inference'] });
  const client = new OpenAI({ apiKey: key, baseURL: `${gateway.url}/v1`, maxRetries: 0 });
  let release!: () => void;
  gateway.primary.enqueue({ kind: 'reply', holdUntil: new Promise<void>((resolve) => (release = resolve)) });
  const id = (await client.batches.create({ input_file_id: await uploadLines(gateway, lines(5), client), endpoint: '/v1/chat/completions', completion_window: '24h' })).id;
  await gateway.primary.arrived(1);
  const revoked = await gateway.test.call('DELETE', `/client/keys/${keyId}`, { token: gateway.test.ownerToken });
  t.equal(revoked.statusCode, 200);
  release();
  // The key is revoked: read the batch with another key of the project.
  const batch = await untilEnded(gateway, id, gateway.client);
  t.equal(batch.status, 'failed');
  t.equal(batch.errors?.data?.[0]?.code, 'key_revoked');
  t.equal(gateway.primary.requests.length, 1, 'only the line already running was sent');
  t.same(batch.request_counts, { total: 5, completed: 1, failed: 0 });
});

t.test('a batch past its completion window expires: lines that ran are in the output, the rest never ran', async (t) => {
  const clock = testClock();
  const gateway = await batchGateway(t, { clock, batches: { lineConcurrency: 1, perOrganizationConcurrency: 1 } });
  // The first line is answered; the others are told to come back in an hour, and wait for it.
  const overloaded = { kind: 'status', status: 429, retryAfter: '3600' } as const;
  gateway.primary.enqueue({ kind: 'reply' }, overloaded, overloaded, overloaded);
  const id = (await gateway.client.batches.create({ input_file_id: await uploadLines(gateway, lines(4)), endpoint: '/v1/chat/completions', completion_window: '24h' })).id;
  await gateway.primary.arrived(4);
  await gateway.test.app.svc.workers.runUntilIdle();
  clock.advance(24 * 3_600_000);
  const ended = await untilEnded(gateway, id, gateway.client, clock);
  t.equal(ended.status, 'expired');
  t.ok(ended.expired_at);
  t.same(ended.request_counts, { total: 4, completed: 1, failed: 0 });
  t.equal(gateway.primary.requests.length, 4, 'no line started after the window closed');
  const never = await fileLines(gateway, ended.error_file_id!);
  t.same(
    never.map((line) => [line.custom_id, line.error.code]),
    [
      ['line-2', 'batch_expired'],
      ['line-3', 'batch_expired'],
      ['line-4', 'batch_expired'],
    ],
  );
});

t.test('every line is checked at submission: a bad line answers 400 naming it, and nothing is created', async (t) => {
  const gateway = await batchGateway(t);
  const cases: Array<[string, unknown[], string, RegExp]> = [
    ['a model that does not take batches', [chatLine('a'), chatLine('b', 'mock-small')], 'model_not_batchable', /Line 2/],
    ['a line calling another endpoint', [chatLine('a'), { ...chatLine('b'), url: '/v1/embeddings' }], 'batch_input_invalid', /Line 2/],
    ['a body the endpoint refuses', [{ ...chatLine('a'), body: { model: 'solo', messages: 'not a list' } }], 'batch_input_invalid', /Line 1.*messages/],
    ['an unknown model', [chatLine('a', 'no-such-model')], 'batch_input_invalid', /Line 1/],
  ];
  for (const [what, input, code, message] of cases) {
    const answer = await gateway.test.call('POST', '/v1/batches', {
      token: gateway.key,
      body: { input_file_id: await uploadLines(gateway, input), endpoint: '/v1/chat/completions', completion_window: '24h' },
    });
    t.equal(answer.statusCode, 400, what);
    t.equal(answer.json().error.code, code, what);
    t.match(answer.json().error.message, message, what);
  }
  t.same((await gateway.test.call('GET', '/v1/batches', { token: gateway.key })).json().data, []);
});

t.test('a file uploaded for another purpose is not a batch input', async (t) => {
  const gateway = await batchGateway(t);
  const { toFile } = await import('openai');
  const file = await gateway.client.files.create({ file: await toFile(Buffer.from('{"a":1}\n'), 'data.jsonl'), purpose: 'user_data' });
  const answer = await gateway.test.call('POST', '/v1/batches', { token: gateway.key, body: { input_file_id: file.id, endpoint: '/v1/chat/completions', completion_window: '24h' } });
  t.equal(answer.statusCode, 400);
  t.equal(answer.json().error.code, 'batch_input_invalid');
});

t.test('unknown fields and unknown completion windows are refused naming them', async (t) => {
  const gateway = await batchGateway(t);
  const inputFileId = await uploadLines(gateway, lines(1));
  const extra = await gateway.test.call('POST', '/v1/batches', {
    token: gateway.key,
    body: { input_file_id: inputFileId, endpoint: '/v1/chat/completions', completion_window: '24h', priority: 1 },
  });
  t.equal(extra.statusCode, 400);
  t.equal(extra.json().error.param, 'priority');
  const window = await gateway.test.call('POST', '/v1/batches', { token: gateway.key, body: { input_file_id: inputFileId, endpoint: '/v1/chat/completions', completion_window: '1h' } });
  t.equal(window.statusCode, 400);
  t.equal(window.json().error.param, 'completion_window');
});

t.test('batch state changes are domain events', async (t) => {
  const gateway = await batchGateway(t);
  const id = (await gateway.client.batches.create({ input_file_id: await uploadLines(gateway, lines(1)), endpoint: '/v1/chat/completions', completion_window: '24h' })).id;
  await untilEnded(gateway, id);
  const events = await database(gateway.test).query('SELECT type FROM events WHERE subject = $1 ORDER BY occurred_at', [id]);
  t.same(
    events.rows.map((row) => row.type),
    ['batch.created', 'batch.completed'],
  );
});

t.test("GET /v1/batches pages newest first with OpenAI's after and has_more; a malformed after is a 400", async (t) => {
  const gateway = await batchGateway(t);
  const ids: string[] = [];
  for (let i = 0; i < 3; i += 1) {
    ids.push((await gateway.client.batches.create({ input_file_id: await uploadLines(gateway, lines(1)), endpoint: '/v1/chat/completions', completion_window: '24h' })).id);
  }
  const first = (await gateway.test.call('GET', '/v1/batches?limit=2', { token: gateway.key })).json();
  t.same(
    first.data.map((batch: { id: string }) => batch.id),
    [ids[2], ids[1]],
  );
  t.equal(first.has_more, true);
  t.equal(first.last_id, ids[1]);
  const second = (await gateway.test.call('GET', `/v1/batches?limit=2&after=${first.last_id}`, { token: gateway.key })).json();
  t.same(
    second.data.map((batch: { id: string }) => batch.id),
    [ids[0]],
  );
  t.equal(second.has_more, false);
  const malformed = await gateway.test.call('GET', '/v1/batches?after=batch_abc', { token: gateway.key });
  t.equal(malformed.statusCode, 400);
  t.equal(malformed.json().error.param, 'after');
});
