import t from 'tap';
import { addPerson, createKey } from '../../helpers/app.ts';
import { batchGateway, chatLine, uploadLines, untilEnded } from '../../helpers/batches.ts';
import type { Gateway } from '../../helpers/gateway.ts';
import { Tokens } from '../../../core/kernel/di-tokens.ts';

/** The management API's view of /v1 batches (plugins/batches/batch-operations.ts), route by route. */

t.setTimeout(180_000);

const lines = (count: number, model = 'solo') => Array.from({ length: count }, (_, i) => chatLine(`line-${i + 1}`, model));

async function submit(gateway: Gateway, count = 2, client = gateway.client): Promise<string> {
  const inputFileId = await uploadLines(gateway, lines(count), client);
  return (await client.batches.create({ input_file_id: inputFileId, endpoint: '/v1/chat/completions', completion_window: '24h' })).id;
}

const gateway = await batchGateway(t);
const { test } = gateway;
const ended = await submit(gateway, 2);
await untilEnded(gateway, ended);

t.test('GET /client/batches lists the batch with its status, counts, models, held amount, key and project', async (t) => {
  const listed = await test.call('GET', '/client/batches');
  t.equal(listed.statusCode, 200);
  const batch = listed.json().data.find((row: { id: string }) => row.id === ended);
  t.match(batch, {
    object: 'batch',
    status: 'completed',
    requestCounts: { total: 2, completed: 2, failed: 0 },
    models: ['solo'],
    heldUsd: Number,
    projectId: test.defaultProjectId,
    keyId: String,
    outputFileId: String,
    finishedAt: String,
  });
  t.ok(batch.heldUsd > 0, 'the worst case held at submission');
});

t.test('GET /client/batches pages newest first by cursor and filters by status, key and project', async (t) => {
  const newer = await submit(gateway, 1);
  await untilEnded(gateway, newer);
  const first = await test.call('GET', '/client/batches?limit=1');
  t.same(
    first.json().data.map((row: { id: string }) => row.id),
    [newer],
    'the newest first',
  );
  const second = await test.call('GET', `/client/batches?limit=1&cursor=${first.json().nextCursor}`);
  t.same(
    second.json().data.map((row: { id: string }) => row.id),
    [ended],
    'the next page continues after it',
  );
  t.equal((await test.call('GET', '/client/batches?status=in_progress')).json().data.length, 0, 'no batch is running');
  const { keyId } = (await test.call('GET', `/client/batches/${ended}`)).json();
  t.equal((await test.call('GET', `/client/batches?keyId=${keyId}`)).json().data.length, 2, "its key's batches");
  const byKey = (await test.call('GET', `/client/batches?keyId=${(await createKey(test, { name: 'no batches' })).id}`)).json();
  t.same(byKey.data, [], "another key's batches: none");
  const project = (await test.call('POST', '/client/projects', { body: { name: 'batches elsewhere' } })).json().id as string;
  t.same((await test.call('GET', `/client/batches?projectId=${project}`)).json().data, [], 'another project: none');
});

t.test("a key of another project sees none of this project's batches and gets 404 on one", async (t) => {
  const project = (await test.call('POST', '/client/projects', { body: { name: 'batches: other project' } })).json().id as string;
  const other = (await createKey(test, { name: 'other project', projectId: project, scopes: ['usage:read', 'requests:read', 'inference', 'projects:write'] })).key;
  const listed = await test.call('GET', '/client/batches', { token: other });
  t.same(listed.json().data, [], 'its own project only, even holding projects:write');
  for (const path of [`/client/batches/${ended}`, `/client/batches/${ended}/output`]) {
    const answer = await test.call('GET', path, { token: other });
    t.equal(answer.statusCode, 404, path);
    t.equal(answer.json().error.code, 'batch_not_found', path);
  }
});

t.test('GET /client/batches/{id}/output downloads the same bytes as /v1/batches/{id}/content', async (t) => {
  const record = await test.call('GET', `/client/batches/${ended}/output`);
  t.equal(record.statusCode, 200);
  t.match(record.json(), { object: 'batch_output', batchId: ended, contentType: 'application/jsonl', bytes: Number });
  const download = await test.call('GET', `/client/batches/${ended}/output`, { headers: { accept: 'application/octet-stream' } });
  t.equal(download.statusCode, 200);
  t.equal(download.headers['content-type'], 'application/jsonl');
  t.match(download.headers['content-disposition'], /^attachment; filename="batch_.*\.jsonl"/);
  const v1 = await test.call('GET', `/v1/batches/${ended}/content`, { token: gateway.key });
  t.equal(download.body, v1.body, 'byte for byte');
  t.equal(Number(download.headers['content-length']), record.json().bytes);
});

t.test("the output takes what the request log's bodies take: requests:read, and a project role that reads bodies", async (t) => {
  const noBodies = (await createKey(test, { name: 'usage only', scopes: ['usage:read'] })).key;
  const refused = await test.call('GET', `/client/batches/${ended}/output`, { token: noBodies });
  t.equal(refused.statusCode, 403);
  t.equal(refused.json().error.code, 'missing_scope');
  t.equal((await test.call('GET', `/client/batches/${ended}`, { token: noBodies })).statusCode, 200, 'the batch itself is usage');
  const identity = test.app.svc.container.resolve(Tokens.Identity);
  const viewer = await addPerson(test, { role: 'member' });
  await identity.projectMembers.upsert({ projectId: test.defaultProjectId, personId: viewer.personId, role: 'viewer' });
  const asViewer = await test.call('GET', `/client/batches/${ended}/output`, { token: viewer.token });
  t.equal(asViewer.statusCode, 403, 'a viewer sees the batch, never its answers');
  t.equal(asViewer.json().error.code, 'project_role_insufficient');
  t.equal((await test.call('GET', `/client/batches/${ended}`, { token: viewer.token })).statusCode, 200, 'a viewer reads the batch');
  const developer = await addPerson(test, { role: 'member' });
  await identity.projectMembers.upsert({ projectId: test.defaultProjectId, personId: developer.personId, role: 'developer' });
  t.equal((await test.call('GET', `/client/batches/${ended}/output`, { token: developer.token })).statusCode, 200, 'a developer reads them');
});

t.test('a running batch has no output yet (404 batch_not_finished); cancelling it from the management API stops it', async (t) => {
  let release!: () => void;
  const held = new Promise<void>((resolve) => (release = resolve));
  gateway.primary.enqueue({ kind: 'reply', holdUntil: held });
  const running = await submit(gateway, 3);
  t.teardown(() => release());
  const early = await test.call('GET', `/client/batches/${running}/output`);
  t.equal(early.statusCode, 404);
  t.equal(early.json().error.code, 'batch_not_finished');
  const cancelled = await test.call('POST', `/client/batches/${running}/cancel`);
  t.equal(cancelled.statusCode, 200);
  t.equal(cancelled.json().status, 'cancelling');
  release();
  const done = await untilEnded(gateway, running);
  t.equal(done.status, 'cancelled');
  const again = await test.call('POST', `/client/batches/${running}/cancel`);
  t.equal(again.statusCode, 409);
  t.equal(again.json().error.code, 'batch_not_cancellable');
  t.equal((await test.call('GET', `/client/batches/${running}/output`)).statusCode, 200, 'a cancelled batch has its output');
});

t.test('an unknown batch is 404 batch_not_found', async (t) => {
  const answer = await test.call('GET', '/client/batches/00000000-0000-4000-8000-000000000000');
  t.equal(answer.statusCode, 404);
  t.equal(answer.json().error.code, 'batch_not_found');
});
