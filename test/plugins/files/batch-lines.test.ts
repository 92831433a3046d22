import t from 'tap';
import { ApiError } from '../../../core/kernel/errors.ts';
import { BATCH_ENDPOINTS, BatchFileReader, BatchUploadCheck, parseBatchLine, readBatchLines } from '../../../plugins/files/batch-lines.ts';
import { batchLine, jsonl } from './files-app.ts';

/** The batch input format, as the upload checks it and the batches plugin reads it (plugins/files/batch-lines.ts). */

const limits = { maxLineBytes: 10_000, maxRequests: 100 };
const line = (value: Record<string, unknown>) => JSON.stringify(value);

function refusal(t: Tap, run: () => unknown, message: RegExp): void {
  try {
    run();
    t.fail(`accepted; expected ${message}`);
  } catch (error) {
    t.type(error, ApiError);
    t.match(error, { status: 400, code: 'invalid_batch_file', param: 'file', message });
  }
}
type Tap = Pick<typeof t, 'fail' | 'type' | 'match'>;

async function* chunks(...parts: Array<string | Buffer>): AsyncGenerator<Uint8Array> {
  for (const part of parts) yield Buffer.isBuffer(part) ? part : Buffer.from(part);
}

async function collect(content: AsyncIterable<Uint8Array>) {
  const lines = [];
  for await (const request of readBatchLines(content, limits)) lines.push(request);
  return lines;
}

t.test('parseBatchLine reads a request line', async (t) => {
  const body = { model: 'm', messages: [{ role: 'user', content: 'hi' }] };
  t.same(parseBatchLine(line({ custom_id: 'x', method: 'POST', url: '/v1/chat/completions', body }), 7), { lineNumber: 7, customId: 'x', method: 'POST', url: '/v1/chat/completions', body });
});

t.test('the batchable endpoints are chat completions, embeddings and responses', async (t) => {
  t.same([...BATCH_ENDPOINTS].sort(), ['/v1/chat/completions', '/v1/embeddings', '/v1/responses']);
  for (const url of BATCH_ENDPOINTS) t.equal(parseBatchLine(line(batchLine('a', { url })), 1).url, url);
});

t.test('parseBatchLine refuses each malformed line, naming its number and the fault', async (t) => {
  const cases: Array<[string, string, RegExp]> = [
    ['not JSON', '{"custom_id": "a",', /^Line 4 of the batch file: not valid JSON/],
    ['not an object', '["a"]', /^Line 4 .*not a JSON object/],
    ['an unknown field', line({ ...batchLine('a'), extra: 1 }), /^Line 4 .*unknown field "extra"/],
    ['custom_id missing', line({ ...batchLine('a'), custom_id: undefined }), /^Line 4 .*custom_id must be a non-empty string/],
    ['custom_id empty', line(batchLine('')), /^Line 4 .*custom_id must be a non-empty string/],
    ['custom_id a number', line(batchLine('a', { custom_id: 5 })), /^Line 4 .*custom_id must be a non-empty string/],
    ['custom_id too long', line(batchLine('x'.repeat(513))), /^Line 4 .*custom_id is longer than 512 characters/],
    ['custom_id with NUL', line(batchLine('a\u0000b')), /^Line 4 .*NUL/],
    ['method GET', line(batchLine('a', { method: 'GET' })), /^Line 4 .*method must be "POST"/],
    ['method missing', line({ ...batchLine('a'), method: undefined }), /^Line 4 .*method must be "POST" \(it is missing\)/],
    ['an unknown url', line(batchLine('a', { url: '/v1/images/generations' })), /^Line 4 .*"\/v1\/images\/generations" is not one of the batchable endpoints: \/v1\/chat\/completions/],
    ['url missing', line({ ...batchLine('a'), url: undefined }), /^Line 4 .*url is missing/],
    ['body missing', line({ ...batchLine('a'), body: undefined }), /^Line 4 .*body is missing/],
    ['body an array', line(batchLine('a', { body: [] })), /^Line 4 .*body must be a JSON object/],
    ['body null', line(batchLine('a', { body: null })), /^Line 4 .*body must be a JSON object/],
    ['a streaming body', line(batchLine('a', { body: { model: 'm', stream: true } })), /^Line 4 .*cannot stream/],
    ['a body nested too deep', line(batchLine('a', { body: { deep: JSON.parse(`${'['.repeat(70)}${']'.repeat(70)}`) } })), /^Line 4 .*body\.deep nests/],
    ['a __proto__ key', '{"custom_id":"a","method":"POST","url":"/v1/embeddings","body":{"__proto__":{"x":1}}}', /^Line 4 .*not valid JSON.*__proto__/],
  ];
  for (const [what, text, message] of cases) await t.test(what, async (t) => refusal(t, () => parseBatchLine(text, 4), message));
});

t.test('a file is read across chunk boundaries, with \\r\\n and blank lines counted but skipped', async (t) => {
  const text = `${line(batchLine('a'))}\r\n\n${line(batchLine('b'))}\n${line(batchLine('c'))}`;
  const cut = [5, 40, 41, 42, text.length - 3];
  const pieces = cut.map((end, i) => text.slice(i === 0 ? 0 : cut[i - 1], end)).concat(text.slice(cut.at(-1)));
  const lines = await collect(chunks(...pieces));
  t.same(
    lines.map((request) => [request.lineNumber, request.customId]),
    [
      [1, 'a'],
      [3, 'b'],
      [4, 'c'],
    ],
    'the last line needs no newline',
  );
});

t.test('a multi-byte character split between chunks is read whole', async (t) => {
  const bytes = Buffer.from(line(batchLine('é-ü')));
  const at = bytes.indexOf(Buffer.from('é')) + 1;
  const [request] = await collect(chunks(bytes.subarray(0, at), bytes.subarray(at)));
  t.equal(request?.customId, 'é-ü');
});

t.test('a custom_id used twice is refused on its second line, naming the first', async (t) => {
  await t.rejects(collect(chunks(jsonl([batchLine('a'), batchLine('b'), batchLine('a')]))), { code: 'invalid_batch_file', message: /^Line 3 .*"a" is already used on line 1/ });
});

t.test('a line that is not UTF-8 is refused', async (t) => {
  await t.rejects(collect(chunks(jsonl([batchLine('a')]), Buffer.from([0xff, 0xfe, 0x0a]))), { code: 'invalid_batch_file', message: /^Line 2 .*not valid UTF-8/ });
});

t.test('a line longer than the body limit is refused before it is whole', async (t) => {
  const reader = new BatchFileReader({ maxLineBytes: 100, maxRequests: 10 });
  refusal(t, () => reader.push(Buffer.alloc(101, 'x')), /^Line 1 .*longer than 100 bytes/);
});

t.test('more requests than the limit are refused at the first one over it', async (t) => {
  const reader = new BatchFileReader({ maxLineBytes: 10_000, maxRequests: 2 });
  refusal(t, () => reader.push(jsonl([batchLine('a'), batchLine('b'), batchLine('c')])), /more than 2 requests \(line 3\)/);
});

t.test('a file without a request is refused', async (t) => {
  for (const content of ['', '\n\n', '  \r\n']) {
    await t.rejects(collect(chunks(content)), { code: 'invalid_batch_file', message: /holds no requests/ }, JSON.stringify(content));
  }
});

t.test('the upload check passes the bytes on unchanged and keeps the first problem when not failing fast', async (t) => {
  const check = new BatchUploadCheck(limits, false);
  const out: Buffer[] = [];
  for await (const chunk of check.pass(chunks('not json\n', line(batchLine('a'))))) out.push(Buffer.from(chunk));
  t.equal(Buffer.concat(out).toString(), `not json\n${line(batchLine('a'))}`);
  t.match(check.problem, { code: 'invalid_batch_file', message: /^Line 1 / });
});

t.test('the upload check fails the stream at the first problem when failing fast', async (t) => {
  const check = new BatchUploadCheck(limits, true);
  const passed: string[] = [];
  const reading = (async () => {
    for await (const chunk of check.pass(chunks(`${line(batchLine('a'))}\n`, 'oops\n', `${line(batchLine('b'))}\n`))) passed.push(Buffer.from(chunk).toString());
  })();
  await t.rejects(reading, { code: 'invalid_batch_file', message: /^Line 2 / });
  t.equal(passed.length, 1, 'nothing after the bad chunk was passed on');
});

t.test('a valid file passes the upload check with no problem', async (t) => {
  const check = new BatchUploadCheck(limits, true);
  for await (const _chunk of check.pass(chunks(jsonl([batchLine('a'), batchLine('b')])))) {
    // drained
  }
  t.equal(check.problem, null);
});
