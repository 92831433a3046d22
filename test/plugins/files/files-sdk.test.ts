import t from 'tap';
import OpenAI, { toFile } from 'openai';
import { batchLine, filesApp, jsonl, sdkClient } from './files-app.ts';

/** /v1/files driven by the official openai package over a real listening server, as a client would. */

t.setTimeout(120_000);

const app = await filesApp(t);
const client = await sdkClient(app.test, app.key);
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const batchInput = jsonl([batchLine('request-1'), batchLine('request-2', { url: '/v1/embeddings', body: { model: 'mock-embed', input: 'x' } })]);

t.test('files.create stores a batch file and answers OpenAI’s file object', async (t) => {
  const file = await client.files.create({ file: await toFile(batchInput, 'input.jsonl'), purpose: 'batch' });
  t.match(file, { object: 'file', bytes: batchInput.length, filename: 'input.jsonl', purpose: 'batch', status: 'processed', expires_at: null });
  t.match(file.id, UUID);
  t.ok(Math.abs(file.created_at - Date.now() / 1000) < 60, 'created_at is in seconds');
});

t.test('files.create stores a file of another purpose as given, whatever its bytes', async (t) => {
  const bytes = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 1, 2, 3]);
  const file = await client.files.create({ file: await toFile(bytes, 'picture.png'), purpose: 'user_data' });
  t.match(file, { purpose: 'user_data', bytes: bytes.length, filename: 'picture.png' });
  const content = await client.files.content(file.id);
  t.same(Buffer.from(await content.arrayBuffer()), bytes, 'the same bytes come back');
});

t.test('files.retrieve answers the same object as the upload did', async (t) => {
  const created = await client.files.create({ file: await toFile(batchInput, 'again.jsonl'), purpose: 'batch' });
  t.same(await client.files.retrieve(created.id), created);
});

t.test('files.content streams the bytes back exactly', async (t) => {
  const created = await client.files.create({ file: await toFile(batchInput, 'content.jsonl'), purpose: 'batch' });
  const response = await client.files.content(created.id);
  t.equal(response.headers.get('content-disposition')?.startsWith('attachment'), true, 'as a download');
  t.same(Buffer.from(await response.arrayBuffer()), batchInput);
});

t.test('files.list pages through every file with for await, newest first, each once', async (t) => {
  const fresh = await filesApp(t);
  const sdk = await sdkClient(fresh.test, fresh.key);
  const ids: string[] = [];
  for (let i = 0; i < 5; i += 1) ids.push((await sdk.files.create({ file: await toFile(Buffer.from(`file ${i}`), `f${i}.txt`), purpose: 'assistants' })).id);
  const listed: string[] = [];
  for await (const file of sdk.files.list({ limit: 2 })) listed.push(file.id);
  t.same(listed, [...ids].reverse(), 'newest first, across three pages');
  const first = await sdk.files.list({ limit: 2 });
  t.match(first, { data: { length: 2 }, has_more: true });
  const ascending: string[] = [];
  for await (const file of sdk.files.list({ limit: 3, order: 'asc' })) ascending.push(file.id);
  t.same(ascending, ids, 'order asc pages oldest first');
});

t.test('files.list filters by purpose', async (t) => {
  const fresh = await filesApp(t);
  const sdk = await sdkClient(fresh.test, fresh.key);
  const batch = await sdk.files.create({ file: await toFile(batchInput, 'b.jsonl'), purpose: 'batch' });
  await sdk.files.create({ file: await toFile(Buffer.from('notes'), 'n.txt'), purpose: 'assistants' });
  const listed: string[] = [];
  for await (const file of sdk.files.list({ purpose: 'batch' })) listed.push(file.id);
  t.same(listed, [batch.id]);
});

t.test('files.delete deletes the file and its contents; it is not found afterwards', async (t) => {
  const before = await app.storedContents();
  const created = await client.files.create({ file: await toFile(batchInput, 'gone.jsonl'), purpose: 'batch' });
  t.equal(await app.storedContents(), before + 1);
  t.same(await client.files.delete(created.id), { id: created.id, object: 'file', deleted: true });
  t.equal(await app.storedContents(), before, 'the contents went with it');
  const error = await client.files.retrieve(created.id).catch((e: unknown) => e);
  t.type(error, OpenAI.NotFoundError);
  t.match((error as InstanceType<typeof OpenAI.NotFoundError>).error, { code: 'file_not_found' });
  const again = await client.files.delete(created.id).catch((e: unknown) => e);
  t.equal((again as { status?: number }).status, 404, 'deleting it again is a 404');
});

t.test('a batch file with a bad line is refused with a 400 naming the line, as the SDK sends it (file before purpose)', async (t) => {
  const before = await app.storedContents();
  const bad = jsonl([batchLine('a'), batchLine('b'), batchLine('a')]);
  const error = await client.files.create({ file: await toFile(bad, 'dup.jsonl'), purpose: 'batch' }).catch((e: unknown) => e);
  t.type(error, OpenAI.BadRequestError);
  t.match((error as InstanceType<typeof OpenAI.BadRequestError>).error, { code: 'invalid_batch_file', param: 'file', message: /Line 3\b.*already used on line 1/ });
  t.equal(await app.storedContents(), before, 'nothing is kept');
});

t.test('an upload over the size limit answers 413 and keeps nothing', async (t) => {
  const small = await filesApp(t, { files: { maxFileBytes: 4096 } });
  const sdk = await sdkClient(small.test, small.key);
  const error = await sdk.files.create({ file: await toFile(Buffer.alloc(8192, 'x'), 'big.txt'), purpose: 'assistants' }).catch((e: unknown) => e);
  t.type(error, OpenAI.APIError);
  t.equal((error as InstanceType<typeof OpenAI.APIError>).status, 413);
  t.match((error as InstanceType<typeof OpenAI.APIError>).error, { code: 'request_too_large', param: 'file', message: /4 KB limit/ });
  t.equal(await small.storedContents(), 0);
  const fits = await sdk.files.create({ file: await toFile(Buffer.alloc(4096, 'x'), 'fits.txt'), purpose: 'assistants' });
  t.equal(fits.bytes, 4096, 'a file at the limit is taken');
});
