import t from 'tap';
import { Tokens } from '../../../core/kernel/di-tokens.ts';
import { buildTestApp, createKey } from '../../helpers/app.ts';
import { formBody, type FormPart } from '../../helpers/multipart.ts';
import { storedApp } from './apps-fixtures.ts';

/**
 * An app's file storage (plugins/apps/README.md "App storage"): files stored in the blobs port by
 * name, a cap per file and a quota per app, private unless made public at an unguessable URL that
 * answers without a key, and gone with the app.
 */
t.setTimeout(120_000);
const test = await buildTestApp(t, {
  plugins: {
    keys: {},
    projects: {},
    githost: {},
    apps: { proxy: { port: 0 }, storage: { maxFileBytes: 64 * 1024, maxAppBytes: 100 * 1024, maxObjects: 5 } },
  },
});
const db = test.app.svc.container.resolve(Tokens.Database);
const blobCount = async () => (await db.query<{ n: number }>("SELECT count(*)::int AS n FROM blobs WHERE key LIKE 'apps-storage/%'")).rows[0]!.n;
const png = Buffer.concat([Buffer.from('89504e470d0a1a0a0000000d49484452', 'hex'), Buffer.alloc(64, 7)]);

async function upload(appId: string, parts: Record<string, FormPart>, token?: string) {
  const { body, contentType } = await formBody(parts);
  return test.call('POST', `/client/apps/${appId}/storage`, { token, body, headers: { 'content-type': contentType } });
}

t.test('an uploaded file is listed by name with its size and the type its bytes show, private', async (t) => {
  const { appId } = await storedApp(test, 'files-listed');
  const stored = await upload(appId, { name: 'pictures/cat.png', file: { bytes: png, filename: 'cat.png', type: 'text/html' } });
  t.equal(stored.statusCode, 200, stored.body);
  t.match(stored.json(), { object: 'app_storage_object', appId, name: 'pictures/cat.png', size: png.length, contentType: 'image/png', public: false, publicUrl: null });
  const listed = (await test.call('GET', `/client/apps/${appId}/storage`)).json();
  t.match(listed, { object: 'list', data: [{ name: 'pictures/cat.png', size: png.length }], usage: { bytes: png.length, objects: 1, maxBytes: 100 * 1024 } });
});

t.test('without a name the file is stored under the uploaded file name', async (t) => {
  const { appId } = await storedApp(test, 'files-default-name');
  const stored = await upload(appId, { file: { bytes: Buffer.from('hello'), filename: 'C:\\notes\\read me.txt' } });
  t.equal(stored.statusCode, 200, stored.body);
  t.equal(stored.json().name, 'read_me.txt');
});

t.test('GET with a name and Accept: application/octet-stream answers the bytes as a download', async (t) => {
  const { appId } = await storedApp(test, 'files-download');
  await upload(appId, { name: 'a.txt', file: { bytes: Buffer.from('contents of a'), filename: 'a.txt' } });
  const bytes = await test.call('GET', `/client/apps/${appId}/storage?name=a.txt`, { headers: { accept: 'application/octet-stream' } });
  t.equal(bytes.statusCode, 200);
  t.equal(bytes.body, 'contents of a');
  t.match(bytes.headers['content-disposition'], /^attachment; filename="a.txt"/);
  const missing = await test.call('GET', `/client/apps/${appId}/storage?name=b.txt`);
  t.match(missing.json(), { error: { code: 'storage_object_not_found', param: 'name' } });
  t.equal(missing.statusCode, 404);
});

t.test('uploading a name again replaces the file and deletes the old bytes', async (t) => {
  const { appId } = await storedApp(test, 'files-replace');
  await upload(appId, { name: 'v.txt', file: { bytes: Buffer.from('one'), filename: 'v.txt' } });
  const before = await blobCount();
  const again = await upload(appId, { name: 'v.txt', file: { bytes: Buffer.from('two!'), filename: 'v.txt' } });
  t.equal(again.json().size, 4);
  t.equal(await blobCount(), before, 'the old blob went when the new one came');
  const bytes = await test.call('GET', `/client/apps/${appId}/storage?name=v.txt`, { headers: { accept: 'application/octet-stream' } });
  t.equal(bytes.body, 'two!');
});

t.test('a file over the per-file cap is refused with 413 and nothing is kept', async (t) => {
  const { appId } = await storedApp(test, 'files-too-big');
  const before = await blobCount();
  const refused = await upload(appId, { name: 'big.bin', file: { bytes: Buffer.alloc(65 * 1024), filename: 'big.bin' } });
  t.equal(refused.statusCode, 413, refused.body);
  t.equal(refused.json().error.code, 'request_too_large');
  t.equal(await blobCount(), before);
  t.same((await test.call('GET', `/client/apps/${appId}/storage`)).json().data, []);
});

t.test('an upload past the app’s quota is 409 storage_quota_exceeded and nothing is kept', async (t) => {
  const { appId } = await storedApp(test, 'files-quota');
  for (const name of ['1', '2', '3']) t.equal((await upload(appId, { name, file: { bytes: Buffer.alloc(30 * 1024, 1), filename: name } })).statusCode, 200);
  const before = await blobCount();
  const refused = await upload(appId, { name: '4', file: { bytes: Buffer.alloc(30 * 1024, 1), filename: '4' } });
  t.equal(refused.statusCode, 409, refused.body);
  t.match(refused.json(), { error: { code: 'storage_quota_exceeded', param: 'file' } });
  t.equal(await blobCount(), before, 'the refused upload’s blob is deleted');
  t.equal((await test.call('GET', `/client/apps/${appId}/storage`)).json().usage.objects, 3);
});

t.test('an upload without a file, or with a name that climbs out, is a 400 naming the field', async (t) => {
  const { appId } = await storedApp(test, 'files-bad-input');
  const none = await upload(appId, { name: 'x.txt' });
  t.match(none.json(), { error: { code: 'invalid_parameter', param: 'file' } });
  const climbing = await upload(appId, { name: '../x.txt', file: { bytes: Buffer.from('x'), filename: 'x.txt' } });
  t.match(climbing.json(), { error: { param: 'name' } });
  t.equal(climbing.statusCode, 400);
});

t.test('a public file answers at its URL without a key; made private, that URL answers 404', async (t) => {
  const { appId } = await storedApp(test, 'files-public');
  await upload(appId, { name: 'logo.png', file: { bytes: png, filename: 'logo.png' } });
  const made = await test.call('POST', `/client/apps/${appId}/storage/public`, { body: { name: 'logo.png', public: true } });
  t.equal(made.statusCode, 200, made.body);
  const { publicUrl } = made.json();
  t.match(publicUrl, /^http:\/\/[^/]+\/app-storage\/[A-Za-z0-9_-]{32}$/);
  const again = await test.call('POST', `/client/apps/${appId}/storage/public`, { body: { name: 'logo.png', public: true } });
  t.equal(again.json().publicUrl, publicUrl, 'making a public file public again keeps its URL');
  const path = new URL(publicUrl).pathname;
  const served = await test.call('GET', path, { token: null });
  t.equal(served.statusCode, 200);
  t.same(served.rawPayload, png);
  t.equal(served.headers['content-type'], 'image/png');
  t.equal(served.headers['x-content-type-options'], 'nosniff');
  t.equal(served.headers['cross-origin-resource-policy'], 'cross-origin');
  const hidden = await test.call('POST', `/client/apps/${appId}/storage/public`, { body: { name: 'logo.png', public: false } });
  t.match(hidden.json(), { public: false, publicUrl: null });
  t.equal((await test.call('GET', path, { token: null })).statusCode, 404);
});

t.test('a token that names no public file is a 404', async (t) => {
  const response = await test.call('GET', `/app-storage/${'A'.repeat(32)}`, { token: null });
  t.equal(response.statusCode, 404);
  t.equal(response.json().error.code, 'storage_object_not_found');
});

t.test('deleting a file removes its bytes; deleting it again is a 404', async (t) => {
  const { appId } = await storedApp(test, 'files-delete');
  await upload(appId, { name: 'gone.txt', file: { bytes: Buffer.from('bye'), filename: 'gone.txt' } });
  const before = await blobCount();
  const deleted = await test.call('DELETE', `/client/apps/${appId}/storage?name=gone.txt`);
  t.match(deleted.json(), { name: 'gone.txt', deleted: true });
  t.equal(await blobCount(), before - 1);
  t.equal((await test.call('DELETE', `/client/apps/${appId}/storage?name=gone.txt`)).statusCode, 404);
});

t.test('deleting the app deletes its files and their bytes', async (t) => {
  const { appId } = await storedApp(test, 'files-app-deleted');
  await upload(appId, { name: 'kept.txt', file: { bytes: Buffer.from('kept'), filename: 'kept.txt' } });
  const before = await blobCount();
  t.equal((await test.call('DELETE', `/client/apps/${appId}`)).statusCode, 200);
  const { rows } = await db.query('SELECT 1 FROM app_storage_objects WHERE app_id = $1', [appId]);
  t.equal(rows.length, 0);
  t.equal(await blobCount(), before - 1);
});

t.test('uploading takes apps:deploy; reading takes any key of the project', async (t) => {
  const { appId } = await storedApp(test, 'files-scopes');
  const reader = await createKey(test, { scopes: ['apps:read'] });
  t.equal((await test.call('GET', `/client/apps/${appId}/storage`, { token: reader.key })).statusCode, 200);
  const refused = await upload(appId, { name: 'x', file: { bytes: Buffer.from('x'), filename: 'x' } }, reader.key);
  t.equal(refused.statusCode, 403);
  t.equal(refused.json().error.code, 'missing_scope');
});
