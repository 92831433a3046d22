import { text } from 'node:stream/consumers';
import t from 'tap';
import { Tokens } from '../../../core/kernel/di-tokens.ts';
import { type GatewayFiles, GatewayFilesPoint } from '../../../core/ports/files.ts';
import { definePlugin } from '../../../core/kernel/plugin.ts';
import { manifest } from '../../../plugins/index.ts';
import { readBatchLines } from '../../../plugins/files/batch-lines.ts';
import { FilesTokens } from '../../../plugins/files/index.ts';
import { allPlugins, buildTestApp, realServersConfig } from '../../helpers/app.ts';
import { testClock } from '../../helpers/jobs.ts';
import { batchLine, filesApp, jsonl } from './files-app.ts';

/** What other plugins use (GatewayFiles, core/ports/files.ts), and how files expire. */

t.setTimeout(120_000);

t.test('the files plugin provides GatewayFiles to other plugins, its file kind answering file_not_found', async (t) => {
  let seen: GatewayFiles | undefined;
  const consumer = definePlugin({
    name: 'files-consumer',
    description: 'Reads GatewayFiles as the batches plugin would',
    async start({ extensions }) {
      seen = extensions.get(GatewayFilesPoint);
    },
  });
  const test = await buildTestApp(t, { manifest: [...manifest, consumer], plugins: { ...allPlugins(), 'files-consumer': {} } });
  t.equal(seen, test.app.svc.container.resolve(FilesTokens.Files));
  t.match(seen?.kind, { name: 'file', notFound: 'file_not_found' });
});

t.test('create stores content as a new file of the owner, listed and served on /v1/files of its project', async (t) => {
  const app = await filesApp(t);
  const files = app.test.app.svc.container.resolve(FilesTokens.Files);
  const whoami = (await app.test.call('GET', '/client/whoami', { token: app.key })).json() as { key?: { id: string } };
  const owner = { organizationId: app.test.organizationId, projectId: app.test.defaultProjectId, keyId: whoami.key?.id ?? null };
  const output = Buffer.from('{"id":"batch_req_1","custom_id":"a"}\n');
  const created = await files.create(owner, { purpose: 'batch_output', filename: 'batch_output.jsonl', content: output });
  t.match(created, { ...owner, purpose: 'batch_output', filename: 'batch_output.jsonl', bytes: output.length, expiresAt: null });
  const listed = (await app.test.call('GET', '/v1/files?purpose=batch_output', { token: app.key })).json() as { data: Array<{ id: string }> };
  t.same(
    listed.data.map((f) => f.id),
    [created.id],
  );
  t.equal((await app.test.call('GET', `/v1/files/${created.id}/content`, { token: app.key })).body, output.toString());
  t.same(await files.get(owner.organizationId, created.id), created, 'get finds it');
  t.equal(await files.get('00000000-0000-4000-8000-000000000000', created.id), null, "another organisation's get does not");
  t.equal(await text(await files.open(created)), output.toString(), 'open streams its bytes');
});

t.test('create takes streamed content and writes its row in the given transaction', async (t) => {
  const app = await filesApp(t);
  const files = app.test.app.svc.container.resolve(FilesTokens.Files);
  const database = app.test.app.svc.container.resolve(Tokens.Database);
  const owner = { organizationId: app.test.organizationId, projectId: app.test.defaultProjectId, keyId: null };
  async function* lines() {
    for (let i = 0; i < 3; i += 1) yield Buffer.from(`line ${i}\n`);
  }
  await t.rejects(
    database.transaction(async (tx) => {
      await files.create(owner, { purpose: 'batch_output', filename: 'rolled-back.jsonl', content: lines() }, tx);
      throw new Error('the caller’s transaction fails');
    }),
    /the caller’s transaction fails/,
  );
  const listed = (await app.test.call('GET', '/v1/files', { token: app.key })).json() as { data: unknown[] };
  t.equal(listed.data.length, 0, 'no row survives the rolled-back transaction');
  const kept = await database.transaction((tx) => files.create(owner, { purpose: 'batch_output', filename: 'out.jsonl', content: lines() }, tx));
  t.equal(kept.bytes, 21);
  t.equal(await text(await files.open(kept)), 'line 0\nline 1\nline 2\n');
});

t.test('the batches plugin reads an uploaded batch file back through open and readBatchLines', async (t) => {
  const app = await filesApp(t);
  const files = app.test.app.svc.container.resolve(FilesTokens.Files);
  const uploaded = (await app.upload({ file: { bytes: jsonl([batchLine('a'), batchLine('b')]), filename: 'in.jsonl' }, purpose: 'batch' })).json() as { id: string };
  const file = (await files.get(app.test.organizationId, uploaded.id))!;
  const ids: string[] = [];
  for await (const line of readBatchLines(await files.open(file), { maxLineBytes: 10_000, maxRequests: 10 })) ids.push(line.customId);
  t.same(ids, ['a', 'b']);
});

t.test('open of a file deleted meanwhile answers file_not_found', async (t) => {
  const app = await filesApp(t);
  const files = app.test.app.svc.container.resolve(FilesTokens.Files);
  const uploaded = (await app.upload({ file: { bytes: Buffer.from('x'), filename: 'x.txt' }, purpose: 'assistants' })).json() as { id: string };
  const file = (await files.get(app.test.organizationId, uploaded.id))!;
  t.equal((await app.test.call('DELETE', `/v1/files/${uploaded.id}`, { token: app.key })).statusCode, 200);
  await t.rejects(files.open(file), { code: 'file_not_found' });
});

t.test('a file uploaded with expires_after expires: not found from then on, then deleted with its contents by the hourly sweep', async (t) => {
  const clock = testClock(new Date().toISOString());
  const app = await filesApp(t, { clock, config: { auth: { sessionTtlDays: 365 } } });
  const response = await app.upload({
    purpose: 'batch',
    'expires_after[anchor]': 'created_at',
    'expires_after[seconds]': '7200',
    file: { bytes: jsonl([batchLine('a')]), filename: 'in.jsonl' },
  });
  const created = response.json() as { id: string; created_at: number; expires_at: number };
  t.equal(created.expires_at, created.created_at + 7200);
  const kept = await app.upload({ purpose: 'assistants', file: { bytes: Buffer.from('stays'), filename: 'stays.txt' } });
  t.equal(kept.statusCode, 200);
  clock.advance(7_199_000);
  t.equal((await app.test.call('GET', `/v1/files/${created.id}`, { token: app.key })).statusCode, 200, 'a second before, it is there');
  clock.advance(1_000);
  t.equal((await app.test.call('GET', `/v1/files/${created.id}`, { token: app.key })).statusCode, 404, 'at its expiry it is not found');
  const listed = (await app.test.call('GET', '/v1/files', { token: app.key })).json() as { data: Array<{ id: string }> };
  t.same(
    listed.data.map((f) => f.id),
    [(kept.json() as { id: string }).id],
    'nor listed',
  );
  t.equal(await app.storedContents(), 2, 'its contents wait for the sweep');
  await app.test.app.svc.workers.runUntilIdle();
  t.equal(await app.storedContents(), 1, 'the sweep deleted them; the file without expiry stays');
  const database = app.test.app.svc.container.resolve(Tokens.Database);
  t.equal((await database.query('SELECT 1 FROM files WHERE id = $1', [created.id])).rows.length, 0, 'and the row');
});

const servers = realServersConfig();

t.test('on PostgreSQL, with the database blob store', { skip: servers ? false : 'needs TEST_PG_URL and TEST_REDIS_URL' }, async (t) => {
  t.teardown(() => servers!.dropSchema());
  const app = await filesApp(t, { config: { storage: servers!.storage } });
  const files = app.test.app.svc.container.resolve(FilesTokens.Files);
  const database = app.test.app.svc.container.resolve(Tokens.Database);
  const owner = { organizationId: app.test.organizationId, projectId: app.test.defaultProjectId, keyId: null };

  t.test('uploads page in both orders, a bad batch line is refused, a delete takes the contents', async (t) => {
    const ids: string[] = [];
    for (let i = 0; i < 3; i += 1) ids.push(((await app.upload({ purpose: 'batch', file: { bytes: jsonl([batchLine(`r${i}`)]), filename: `${i}.jsonl` } })).json() as { id: string }).id);
    const page = async (query: string) =>
      (await app.test.call('GET', `/v1/files?${query}`, { token: app.key })).json() as { data: Array<{ id: string }>; has_more: boolean; last_id: string };
    const first = await page('limit=2');
    t.same(
      first.data.map((f) => f.id),
      [ids[2], ids[1]],
    );
    t.equal(first.has_more, true);
    t.same(
      (await page(`limit=2&after=${first.last_id}`)).data.map((f) => f.id),
      [ids[0]],
    );
    t.same(
      (await page('order=asc')).data.map((f) => f.id),
      ids,
    );
    const refused = await app.upload({ file: { bytes: jsonl([batchLine('a'), '{']), filename: 'bad.jsonl' }, purpose: 'batch' });
    t.match(refused.json(), { error: { code: 'invalid_batch_file', message: /^Line 2 / } });
    t.equal(await app.storedContents(), 3, 'the refused file left nothing');
    t.equal((await app.test.call('DELETE', `/v1/files/${ids[0]}`, { token: app.key })).statusCode, 200);
    t.equal(await app.storedContents(), 2);
  });

  t.test('create in a transaction that rolls back leaves neither row nor bytes; one that commits keeps both', async (t) => {
    const before = await app.storedContents();
    await t.rejects(
      database.transaction(async (tx) => {
        await files.create(owner, { purpose: 'batch_output', filename: 'out.jsonl', content: Buffer.from('{"a":1}\n') }, tx);
        throw new Error('rolled back');
      }),
      /rolled back/,
    );
    t.equal(await app.storedContents(), before, 'the bytes went with the rollback');
    const kept = await database.transaction((tx) => files.create(owner, { purpose: 'batch_output', filename: 'out.jsonl', content: Buffer.from('{"a":1}\n') }, tx));
    t.equal(await app.storedContents(), before + 1);
    t.equal(await text(await files.open(kept)), '{"a":1}\n');
  });
});
