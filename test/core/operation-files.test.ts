import t from 'tap';
import { Tokens } from '../../core/kernel/di-tokens.ts';
import { fileOperationsPlugin } from '../fixtures/file-operations-plugin.ts';
import { allPlugins, buildTestApp, createKey } from '../helpers/app.ts';
import { formBody, type FormPart } from '../helpers/multipart.ts';
import { manifest as defaultManifest } from '../../plugins/index.ts';

/**
 * Operations that take files (multipart beside JSON) and answer files (a download for a request
 * that accepts only bytes): core/operations/operations.ts `files` and `download`, mounted by
 * core/http/mount-operations.ts.
 */
const manifest = [...defaultManifest.filter((plugin) => ['account', 'keys', 'projects'].includes(plugin.name)), fileOperationsPlugin];
const test = await buildTestApp(t, { manifest, plugins: allPlugins(manifest), config: { server: { bodyLimitBytes: 8 * 1024 } } });
const db = test.app.svc.container.resolve(Tokens.Database);
const blobCount = async () => (await db.query<{ n: number }>('SELECT count(*)::int AS n FROM blobs')).rows[0]!.n;
const png = Buffer.from('89504e470d0a1a0a0000000d4948445200000001', 'hex');

async function send(parts: Record<string, FormPart>, token?: string) {
  const { body, contentType } = await formBody(parts);
  return test.call('POST', '/client/fixture/notes', { token, body, headers: { 'content-type': contentType } });
}

t.test('an operation that takes files reads them as multipart beside its text fields, stored with the type their bytes show', async (t) => {
  const response = await send({
    title: 'two files',
    files: [
      { bytes: png, filename: 'C:\\Users\\ada\\shot.png', type: 'text/html' },
      { bytes: Buffer.from('hello'), filename: 'notes.txt' },
    ],
  });
  t.equal(response.statusCode, 200, response.body);
  t.match(response.json(), {
    title: 'two files',
    files: [
      { filename: 'shot.png', contentType: 'image/png', declaredContentType: 'text/html', size: png.length },
      { filename: 'notes.txt', contentType: 'text/plain; charset=utf-8' },
    ],
  });
});

t.test('the same operation takes JSON without files, at the JSON body limit rather than the upload limit', async (t) => {
  const json = await test.call('POST', '/client/fixture/notes', { body: { title: 'as JSON' } });
  t.equal(json.statusCode, 200);
  t.same(json.json().files, []);
  const large = await test.call('POST', '/client/fixture/notes', { body: { title: 'x'.repeat(9 * 1024) } });
  t.equal(large.statusCode, 413);
  t.equal(large.json().error.code, 'request_too_large');
  const multipart = await send({ title: 'files beyond the JSON limit', files: { bytes: Buffer.alloc(12 * 1024, 0), filename: 'a.bin' } });
  t.equal(multipart.statusCode, 200, 'a file larger than the JSON limit is taken');
  t.equal(multipart.json().files[0].contentType, 'application/octet-stream');
});

t.test('when the call fails, the files it received are deleted', async (t) => {
  const before = await blobCount();
  const failed = await send({ title: 'fail', files: [{ bytes: png, filename: 'a.png' }] });
  t.equal(failed.statusCode, 400);
  t.match(failed.json().error, { code: 'invalid_parameter', param: 'title' });
  t.equal(await blobCount(), before);
  const refused = await send({ title: 'ok', extra: 'field', files: [{ bytes: png, filename: 'a.png' }] });
  t.match(refused.json().error, { code: 'unknown_field', param: 'extra' }, 'the strict body refuses an unknown text field');
  const twice = await send({ title: 'ok', files: [{ bytes: png, filename: 'a.png' }] }).then(async () => {
    const { body, contentType } = await formBody({ title: 'once' });
    const doubled = Buffer.concat([body.subarray(0, body.length - Buffer.from(`--${contentType.split('boundary=')[1]}--\r\n`).length), body]);
    return test.call('POST', '/client/fixture/notes', { body: doubled, headers: { 'content-type': contentType } });
  });
  t.equal(twice.json().error.param, 'title', 'a field sent twice is refused naming it');
  t.equal(await blobCount(), before + 1, 'only the file of the call that succeeded is kept');
});

t.test('an answer that is a file: JSON by default, the bytes as a download when the request accepts only them', async (t) => {
  const created = await send({ title: 'to download', files: { bytes: png, filename: 'résumé; v2.png' } });
  const id = created.json().files[0].id as string;
  const record = await test.call('GET', `/client/fixture/files/${id}`);
  t.match(record.json(), { id, filename: 'résumé; v2.png', contentType: 'image/png' });
  const file = await test.call('GET', `/client/fixture/files/${id}`, { headers: { accept: 'application/octet-stream' } });
  t.ok(file.rawPayload.equals(png));
  t.equal(file.headers['content-type'], 'image/png');
  t.equal(file.headers['content-disposition'], `attachment; filename="r_sum__ v2.png"; filename*=UTF-8''r%C3%A9sum%C3%A9%3B%20v2.png`);
  t.equal(file.headers['x-content-type-options'], 'nosniff');
  t.equal(file.headers['content-security-policy'], "default-src 'none'; sandbox");
  const zeroQ = await test.call('GET', `/client/fixture/files/${id}`, { headers: { accept: 'application/octet-stream;q=0, application/json' } });
  t.match(zeroQ.headers['content-type'], /^application\/json/, 'q=0 refuses the bytes');
});

t.test('a credential the operation refuses is refused before any file is stored', async (t) => {
  const before = await blobCount();
  const { key } = await createKey(test, { name: 'not a person' });
  const response = await send({ title: 'by a key', files: { bytes: png, filename: 'a.png' } }, key);
  t.equal(response.statusCode, 403);
  t.equal(response.json().error.code, 'person_required');
  t.equal(await blobCount(), before);
});

t.test('the OpenAPI document shows the multipart form beside the JSON body, and the file beside the JSON answer', async (t) => {
  const document = (await test.call('GET', '/client/openapi.json', { token: null })).json();
  const create = document.paths['/fixture/notes'].post;
  t.ok(create.requestBody.content['application/json'].schema.properties.title);
  t.same(create.requestBody.content['multipart/form-data'].schema.properties.files, {
    type: 'array',
    maxItems: 2,
    items: { type: 'string', contentMediaType: 'application/octet-stream' },
    description: 'Two files of 16 KB',
  });
  const get = document.paths['/fixture/files/{id}'].get;
  t.same(Object.keys(get.responses['200'].content), ['application/json', 'application/octet-stream']);
  t.match(get.responses['200'].description, /Accept: application\/octet-stream/);
});

t.test('a body of another type is 415, saying both types the route takes', async (t) => {
  const response = await test.call('POST', '/client/fixture/notes', { body: 'title=x', headers: { 'content-type': 'application/x-www-form-urlencoded' } });
  t.equal(response.statusCode, 415);
  t.match(response.json().error, { code: 'unsupported_media_type', message: /send application\/json or multipart\/form-data/ });
});
