import t from 'tap';
import { SCOPES } from '../../../core/identity/scopes.ts';
import { createKey } from '../../helpers/app.ts';
import type { FormPart } from '../../helpers/multipart.ts';
import { batchLine, filesApp, jsonl } from './files-app.ts';

/** /v1/files over app.inject: the batch check at upload, input refusals, projects, and the rate-limit headers. */

t.setTimeout(120_000);

const app = await filesApp(t);
const { test } = app;
const file = (bytes: Buffer, filename = 'input.jsonl') => ({ bytes, filename });

const BAD_LINES: Array<[string, Buffer, RegExp]> = [
  ['a line that is not JSON', jsonl([batchLine('a'), '{"custom_id": "b", "method": "POST"', batchLine('c')]), /^Line 2 of the batch file: not valid JSON/],
  ['a duplicate custom_id', jsonl([batchLine('a'), batchLine('b'), batchLine('b')]), /^Line 3 .*"b" is already used on line 2/],
  ['a wrong method', jsonl([batchLine('a', { method: 'GET' })]), /^Line 1 .*method must be "POST"/],
  ['an unknown url', jsonl([batchLine('a'), batchLine('b'), batchLine('c'), batchLine('d', { url: '/v1/nope' })]), /^Line 4 .*"\/v1\/nope" is not one of the batchable endpoints/],
  ['a missing body', jsonl([batchLine('a'), { ...batchLine('b'), body: undefined }]), /^Line 2 .*body is missing/],
];

for (const [what, bytes, message] of BAD_LINES) {
  t.test(`a batch file with ${what} answers 400 naming the line, and nothing is stored, whichever field comes first`, async (t) => {
    const before = await app.storedContents();
    const orders: Array<[string, Record<string, FormPart>]> = [
      ['purpose first', { purpose: 'batch', file: file(bytes) }],
      ['file first', { file: file(bytes), purpose: 'batch' }],
    ];
    for (const [order, parts] of orders) {
      const response = await app.upload(parts);
      t.equal(response.statusCode, 400, order);
      t.match(response.json(), { error: { code: 'invalid_batch_file', type: 'invalid_request_error', param: 'file', message } }, order);
    }
    t.equal(await app.storedContents(), before);
  });
}

t.test('blank lines count in the line numbers', async (t) => {
  const bytes = Buffer.from(`${JSON.stringify(batchLine('a'))}\n\n\n${JSON.stringify(batchLine('b', { method: 'PUT' }))}\n`);
  const response = await app.upload({ purpose: 'batch', file: file(bytes) });
  t.match(response.json(), { error: { message: /^Line 4 / } });
});

t.test('a batch file without a request answers 400', async (t) => {
  const response = await app.upload({ file: file(Buffer.from('\n')), purpose: 'batch' });
  t.equal(response.statusCode, 400);
  t.match(response.json(), { error: { code: 'invalid_batch_file', message: /holds no requests/ } });
});

t.test('a batch file with more requests than maxBatchRequests answers 400', async (t) => {
  const few = await filesApp(t, { files: { maxBatchRequests: 2 } });
  const response = await few.upload({ file: file(jsonl([batchLine('a'), batchLine('b'), batchLine('c')])), purpose: 'batch' });
  t.equal(response.statusCode, 400);
  t.match(response.json(), { error: { code: 'invalid_batch_file', message: /more than 2 requests \(line 3\)/ } });
});

t.test('a batch line longer than the JSON body limit answers 400 naming it', async (t) => {
  const narrow = await filesApp(t, { config: { server: { bodyLimitBytes: 2048 } } });
  const long = batchLine('a', { body: { model: 'm', input: 'x'.repeat(3000) } });
  const response = await narrow.upload({ purpose: 'batch', file: file(jsonl([batchLine('z'), long])) });
  t.equal(response.statusCode, 400);
  t.match(response.json(), { error: { code: 'invalid_batch_file', message: /^Line 2 .*longer than 2 KB/ } });
});

t.test('bytes that are no batch file are stored as given under another purpose', async (t) => {
  const bytes = jsonl([batchLine('a'), batchLine('a'), 'not json']);
  const response = await app.upload({ file: file(bytes, 'notes.jsonl'), purpose: 'fine-tune' });
  t.equal(response.statusCode, 200, response.body);
  t.match(response.json(), { object: 'file', purpose: 'fine-tune', bytes: bytes.length });
});

t.test('an upload without a purpose, with an unknown purpose, or with it twice answers 400 naming purpose; nothing is stored', async (t) => {
  const before = await app.storedContents();
  const cases: Array<[string, Record<string, FormPart>, string, string]> = [
    ['no purpose', { file: file(jsonl([batchLine('a')])) }, 'invalid_parameter', 'purpose'],
    ['an unknown purpose, after the file', { file: file(jsonl([batchLine('a')])), purpose: 'shopping' }, 'invalid_parameter', 'purpose'],
    ['an unknown purpose, before the file', { purpose: 'batch_output', file: file(jsonl([batchLine('a')])) }, 'invalid_parameter', 'purpose'],
  ];
  for (const [what, parts, code, param] of cases) {
    const response = await app.upload(parts);
    t.equal(response.statusCode, 400, what);
    t.match(response.json(), { error: { code, param } }, what);
  }
  const { body, contentType } = await (await import('../../helpers/multipart.ts')).formBody({ purpose: 'batch', file: file(jsonl([batchLine('a')])) });
  const twice = Buffer.concat([Buffer.from(`--${contentType.split('boundary=')[1]}\r\nContent-Disposition: form-data; name="purpose"\r\n\r\nbatch\r\n`), body]);
  const response = await test.call('POST', '/v1/files', { token: app.key, body: twice, headers: { 'content-type': contentType } });
  t.match(response.json(), { error: { code: 'invalid_parameter', param: 'purpose', message: /sent twice/ } }, 'purpose twice');
  t.equal(await app.storedContents(), before);
});

t.test('an upload without a file, or with the file under another name, answers 400', async (t) => {
  const none = await app.upload({ purpose: 'batch' });
  t.match(none.json(), { error: { code: 'invalid_parameter', param: 'file' } });
  const elsewhere = await app.upload({ purpose: 'batch', document: file(jsonl([batchLine('a')])) });
  t.match(elsewhere.json(), { error: { code: 'unknown_field', param: 'document' } });
});

t.test('an unknown field answers 400 naming it', async (t) => {
  const response = await app.upload({ purpose: 'batch', colour: 'blue', file: file(jsonl([batchLine('a')])) });
  t.equal(response.statusCode, 400);
  t.match(response.json(), { error: { code: 'unknown_field', param: 'colour' } });
});

t.test('a JSON body answers 415', async (t) => {
  const response = await test.call('POST', '/v1/files', { token: app.key, body: { purpose: 'batch' } });
  t.equal(response.statusCode, 415);
});

t.test('expires_after needs its anchor and its seconds, an hour to 30 days', async (t) => {
  const bytes = file(Buffer.from('x'));
  for (const [what, parts] of [
    ['seconds without anchor', { purpose: 'assistants', 'expires_after[seconds]': '3600', file: bytes }],
    ['anchor without seconds', { purpose: 'assistants', 'expires_after[anchor]': 'created_at', file: bytes }],
    ['too short', { purpose: 'assistants', 'expires_after[anchor]': 'created_at', 'expires_after[seconds]': '60', file: bytes }],
    ['another anchor', { purpose: 'assistants', 'expires_after[anchor]': 'uploaded_at', 'expires_after[seconds]': '3600', file: bytes }],
  ] as const) {
    const response = await app.upload(parts);
    t.equal(response.statusCode, 400, what);
    t.match(response.json(), { error: { code: 'invalid_parameter', param: /^expires_after/ } }, what);
  }
});

t.test("another project's key gets 404 on retrieve, delete and content, and does not list the file", async (t) => {
  const created = (await app.upload({ purpose: 'batch', file: file(jsonl([batchLine('a')])) })).json() as { id: string };
  const projectB = ((await test.call('POST', '/client/projects', { body: { name: 'files B' } })).json() as { id: string }).id;
  const ofB = await createKey(test, { name: 'of B', projectId: projectB, scopes: ['inference'] });
  // projects:write reaches every project on /client; a file stays its own project's all the same.
  const ofBWithEveryScope = await createKey(test, { name: 'of B, every scope', projectId: projectB, scopes: [...SCOPES] });
  for (const [who, token] of [
    ['key of B', ofB.key],
    ['key of B holding projects:write', ofBWithEveryScope.key],
  ] as const) {
    for (const [method, url] of [
      ['GET', `/v1/files/${created.id}`],
      ['GET', `/v1/files/${created.id}/content`],
      ['DELETE', `/v1/files/${created.id}`],
    ] as const) {
      const response = await test.call(method, url, { token });
      t.equal(response.statusCode, 404, `${who}: ${method} ${url}`);
      t.match(response.json(), { error: { code: 'file_not_found', type: 'not_found_error', param: 'id' } });
    }
    const listed = (await test.call('GET', '/v1/files', { token })).json() as { data: Array<{ id: string }> };
    t.notOk(
      listed.data.some((f) => f.id === created.id),
      `${who}: not listed`,
    );
  }
  t.equal((await test.call('GET', `/v1/files/${created.id}`, { token: app.key })).statusCode, 200, 'the file is still there for its own project');
});

t.test('the list shows only the caller’s project’s files', async (t) => {
  const projectC = ((await test.call('POST', '/client/projects', { body: { name: 'files C' } })).json() as { id: string }).id;
  const ofC = await createKey(test, { name: 'of C', projectId: projectC, scopes: ['inference'] });
  const mine = (await app.upload({ purpose: 'assistants', file: file(Buffer.from('c')) }, ofC.key)).json() as { id: string };
  const listed = (await test.call('GET', '/v1/files', { token: ofC.key })).json();
  t.match(listed, { object: 'list', first_id: mine.id, last_id: mine.id, has_more: false });
  t.same(
    listed.data.map((f: { id: string }) => f.id),
    [mine.id],
  );
});

t.test('after must name a file of the caller’s project', async (t) => {
  const response = await test.call('GET', '/v1/files?after=00000000-0000-4000-8000-000000000000', { token: app.key });
  t.equal(response.statusCode, 400);
  t.match(response.json(), { error: { code: 'invalid_parameter', param: 'after' } });
  const malformed = await test.call('GET', '/v1/files?limit=0', { token: app.key });
  t.match(malformed.json(), { error: { code: 'invalid_parameter', param: 'limit' } });
});

t.test('an owner’s session is refused on /v1/files: the /v1 surface takes API keys', async (t) => {
  const response = await test.call('GET', '/v1/files');
  t.equal(response.statusCode, 401);
  t.match(response.json(), { error: { code: 'api_key_required' } });
});

t.test('a key without the inference scope gets 403', async (t) => {
  const { key } = await createKey(test, { name: 'no inference', scopes: ['usage:read'] });
  const response = await test.call('GET', '/v1/files', { token: key });
  t.equal(response.statusCode, 403);
  t.match(response.json(), { error: { code: 'missing_scope' } });
});

t.test('every /v1/files answer carries the rate-limit headers, read without spending the allowance', async (t) => {
  const limited = await filesApp(t, { files: { maxFileBytes: 4096 } });
  const id = ((await limited.upload({ purpose: 'batch', file: file(jsonl([batchLine('a')])) })).json() as { id: string }).id;
  const answers: Array<[string, () => ReturnType<typeof limited.upload>]> = [
    ['upload', () => limited.upload({ purpose: 'assistants', file: file(Buffer.from('x')) })],
    ['upload refused 400', () => limited.upload({ purpose: 'batch', file: file(Buffer.from('nope\n')) })],
    ['upload refused 413', () => limited.upload({ purpose: 'assistants', file: file(Buffer.alloc(5000)) })],
    ['upload refused 415', () => limited.test.call('POST', '/v1/files', { token: limited.key, body: {} })],
    ['list', () => limited.test.call('GET', '/v1/files', { token: limited.key })],
    ['retrieve', () => limited.test.call('GET', `/v1/files/${id}`, { token: limited.key })],
    ['content', () => limited.test.call('GET', `/v1/files/${id}/content`, { token: limited.key })],
    ['retrieve 404', () => limited.test.call('GET', '/v1/files/00000000-0000-4000-8000-000000000000', { token: limited.key })],
    ['delete', () => limited.test.call('DELETE', `/v1/files/${id}`, { token: limited.key })],
  ];
  for (const [what, send] of answers) {
    const response = await send();
    t.equal(response.headers['x-ratelimit-limit-requests'], '600', `${what} (${response.statusCode})`);
    t.equal(response.headers['x-ratelimit-remaining-requests'], '600', `${what}: nothing spent`);
    t.ok(response.headers['x-ratelimit-reset-requests'], `${what}: reset`);
  }
});
