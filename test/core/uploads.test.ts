import { createHash, randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { request as httpRequest } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Readable } from 'node:stream';
import t, { type Test } from 'tap';
import { Tokens } from '../../core/kernel/di-tokens.ts';
import { uploadPlugin, uploadProbe } from '../fixtures/upload-plugin.ts';
import { allPlugins, buildTestApp } from '../helpers/app.ts';
import { formBody } from '../helpers/multipart.ts';

const manifest = [uploadPlugin];
const test = await buildTestApp(t, {
  manifest,
  plugins: allPlugins(manifest),
  config: { server: { bodyLimitBytes: 32 * 1024, uploadLimitBytes: 256 * 1024 } },
});
const blobs = test.app.svc.container.resolve(Tokens.Blobs);

async function upload(url: string, parts: Parameters<typeof formBody>[0]) {
  const { body, contentType } = await formBody(parts);
  return test.call('POST', url, { body, headers: { 'content-type': contentType } });
}

function assertEnvelope(t: Test, response: { statusCode: number; json(): unknown }, status: number, code: string): { message: string; param: string | null } {
  t.equal(response.statusCode, status);
  const error = (response.json() as { error: { message: string; type: string; code: string; param: string | null } }).error;
  t.equal(error.code, code);
  t.equal(error.type, 'invalid_request_error');
  return error;
}

const sha256 = (bytes: Buffer) => createHash('sha256').update(bytes).digest('hex');

t.test('an upload route takes a body over the JSON limit and streams its file into the blob store', async (t) => {
  const bytes = randomBytes(100 * 1024);
  const response = await upload('/v1/fixture/uploads', { purpose: 'batch', file: { bytes, filename: 'input.jsonl', type: 'application/jsonl' } });
  t.equal(response.statusCode, 200, response.body);
  const { fields, files } = response.json() as { fields: Record<string, string>; files: Array<{ key: string; size: number; sha256: string; filename: string; contentType: string }> };
  t.same(fields, { purpose: 'batch' });
  t.equal(files.length, 1);
  t.match(files[0], { filename: 'input.jsonl', size: bytes.length, sha256: sha256(bytes), contentType: 'application/jsonl' });
  const stored = await blobs.get(files[0]!.key);
  const chunks: Buffer[] = [];
  for await (const chunk of stored!.stream) chunks.push(chunk as Buffer);
  t.ok(Buffer.concat(chunks).equals(bytes));
});

t.test('a JSON route keeps the server body limit: 413 request_too_large naming it', async (t) => {
  const response = await test.call('POST', '/v1/fixture/json', { body: { text: 'x'.repeat(40 * 1024) } });
  t.match(assertEnvelope(t, response, 413, 'request_too_large').message, /32 KB/);
});

t.test('a JSON route may declare its own body limit, and its 413 names it', async (t) => {
  t.equal((await test.call('POST', '/v1/fixture/json/small', { body: { text: 'x'.repeat(1000) } })).statusCode, 200);
  const response = await test.call('POST', '/v1/fixture/json/small', { body: { text: 'x'.repeat(3000) } });
  t.match(assertEnvelope(t, response, 413, 'request_too_large').message, /2 KB/);
});

t.test('a multipart body over the upload limit is refused from its Content-Length, before it is read', async (t) => {
  const before = (await blobs.list('fixture/')).length;
  const response = await upload('/v1/fixture/uploads', { file: { bytes: randomBytes(300 * 1024), filename: 'big.bin' } });
  t.match(assertEnvelope(t, response, 413, 'request_too_large').message, /256 KB/);
  t.equal((await blobs.list('fixture/')).length, before);
});

t.test('a multipart body without Content-Length is counted: over the limit it answers 413 and keeps nothing', async (t) => {
  const before = (await blobs.list('fixture/')).length;
  const { body, contentType } = await formBody({ file: { bytes: randomBytes(300 * 1024), filename: 'big.bin' } });
  // A stream payload goes out chunked, with no Content-Length to refuse it by.
  const response = await test.app.inject({
    method: 'POST',
    url: '/v1/fixture/uploads',
    headers: { authorization: `Bearer ${test.ownerToken}`, 'content-type': contentType },
    payload: Readable.from([body.subarray(0, 100_000), body.subarray(100_000, 200_000), body.subarray(200_000)]),
  });
  assertEnvelope(t, response, 413, 'request_too_large');
  t.equal((await blobs.list('fixture/')).length, before);
});

t.test('a file over its route’s file limit answers 413 naming the field, and nothing is kept', async (t) => {
  const before = (await blobs.list('fixture/')).length;
  const response = await upload('/v1/fixture/uploads/small', { file: { bytes: randomBytes(20 * 1024), filename: 'twenty.bin' } });
  const error = assertEnvelope(t, response, 413, 'request_too_large');
  t.match(error.message, /twenty\.bin.*16 KB/);
  t.equal(error.param, 'file');
  t.equal((await blobs.list('fixture/')).length, before);
});

t.test('a route’s own body limit applies to multipart too', async (t) => {
  const response = await upload('/v1/fixture/uploads/small', {
    a: { bytes: randomBytes(15 * 1024), filename: 'a.bin' },
    b: { bytes: randomBytes(15 * 1024), filename: 'b.bin' },
  });
  t.equal(response.statusCode, 200, 'two files within every limit');
  const over = await upload('/v1/fixture/uploads/small', { a: { bytes: randomBytes(15 * 1024), filename: 'a.bin' }, pad: 'x'.repeat(50 * 1024) });
  t.match(assertEnvelope(t, over, 413, 'request_too_large').message, /64 KB/);
});

t.test('a field over its limit answers 413 naming it', async (t) => {
  const error = assertEnvelope(t, await upload('/v1/fixture/uploads/small', { purpose: 'x'.repeat(101) }), 413, 'request_too_large');
  t.equal(error.param, 'purpose');
});

t.test('more files or fields than a route takes answer 413', async (t) => {
  const file = { bytes: Buffer.from('x'), filename: 'x.txt' };
  assertEnvelope(t, await upload('/v1/fixture/uploads/small', { a: file, b: file, c: file }), 413, 'request_too_large');
  assertEnvelope(t, await upload('/v1/fixture/uploads/small', { a: '1', b: '2', c: '3' }), 413, 'request_too_large');
});

t.test('a malformed multipart body answers 400 invalid_multipart', async (t) => {
  const headers = { 'content-type': 'multipart/form-data; boundary=XyZ' };
  const broken = await test.call('POST', '/v1/fixture/uploads', { body: '--XyZ\r\nContent-Disposition: form-data; name="a"\r\n\r\nvalue-without-end', headers });
  assertEnvelope(t, broken, 400, 'invalid_multipart');
  const noBoundary = await test.call('POST', '/v1/fixture/uploads', { body: 'whatever', headers: { 'content-type': 'multipart/form-data' } });
  assertEnvelope(t, noBoundary, 400, 'invalid_multipart');
});

t.test('an upload route answers 415 to JSON and to a body with no content type', async (t) => {
  const json = await test.call('POST', '/v1/fixture/uploads', { body: { file: 'x' } });
  t.match(assertEnvelope(t, json, 415, 'unsupported_media_type').message, /multipart\/form-data/);
  const empty = await test.call('POST', '/v1/fixture/uploads');
  assertEnvelope(t, empty, 415, 'unsupported_media_type');
});

t.test('over a real connection', async (t) => {
  await test.app.listen({ host: '127.0.0.1', port: 0 });
  const { port } = test.app.server.address() as AddressInfo;

  t.test('the file reaches the handler while the client is still sending it', async (t) => {
    const { body, contentType } = await formBody({ file: { bytes: randomBytes(200 * 1024), filename: 'slow.bin' } });
    const request = httpRequest({
      host: '127.0.0.1',
      port,
      method: 'POST',
      path: '/v1/fixture/uploads',
      headers: { authorization: `Bearer ${test.ownerToken}`, 'content-type': contentType },
    });
    const answered = once(request, 'response');
    const firstBytes = once(uploadProbe, 'first-bytes');
    request.write(body.subarray(0, 50 * 1024));
    await firstBytes; // the rest has not been written yet
    request.end(body.subarray(50 * 1024));
    const [response] = (await answered) as [import('node:http').IncomingMessage];
    t.equal(response.statusCode, 200);
    response.resume();
  });

  t.test('a handler that stops reading midway still answers, and the connection serves the next request', async (t) => {
    const { body, contentType } = await formBody({ file: { bytes: randomBytes(200 * 1024), filename: 'sniffed.bin' } });
    for (let attempt = 0; attempt < 3; attempt++) {
      const response = await fetch(`http://127.0.0.1:${port}/v1/fixture/uploads/peek`, {
        method: 'POST',
        headers: { authorization: `Bearer ${test.ownerToken}`, 'content-type': contentType },
        body,
      });
      t.equal(response.status, 200);
      t.same(await response.json(), { peeked: true });
    }
  });

  t.test('a client still sending receives the 413, not a reset connection', async (t) => {
    const { body, contentType } = await formBody({ file: { bytes: randomBytes(1024 * 1024), filename: 'huge.bin' } });
    for (const chunked of [false, true]) {
      for (let attempt = 0; attempt < 5; attempt++) {
        const payload = chunked ? Readable.from([body.subarray(0, 65_536), body.subarray(65_536)]) : body;
        const response = await fetch(`http://127.0.0.1:${port}/v1/fixture/uploads/small`, {
          method: 'POST',
          headers: { authorization: `Bearer ${test.ownerToken}`, 'content-type': contentType },
          body: payload as unknown as Blob,
          ...(chunked ? { duplex: 'half' } : {}),
        } as RequestInit);
        t.equal(response.status, 413, `${chunked ? 'chunked' : 'with Content-Length'}, attempt ${attempt + 1}`);
        await response.arrayBuffer();
      }
    }
  });
});
