import { randomUUID } from 'node:crypto';
import t from 'tap';
import { Tokens } from '../../core/kernel/di-tokens.ts';
import { encodeCursor } from '../../core/vocabulary/pagination.ts';
import { addPerson, buildTestApp, createKey } from '../helpers/app.ts';
import { assertEnvelope } from '../helpers/envelope.ts';
import { type Item, pageThrough } from '../helpers/pages.ts';

// Every list route pages newest first by (created_at, id) with an opaque nextCursor.

const test = await buildTestApp(t);
const db = test.app.svc.container.resolve(Tokens.Database);
const identity = test.app.svc.container.resolve(Tokens.Identity);
const ownerPersonId = ((await test.call('GET', '/client/whoami')).json() as Item).credential.personId as string;

async function created(method: string, path: string, body: unknown): Promise<Item> {
  const response = await test.call(method, path, { body });
  if (response.statusCode >= 300) throw new Error(`${method} ${path}: ${response.statusCode} ${response.body}`);
  return response.json() as Item;
}

// Rows for every list: keys, projects and their members, the owner's organisations, audit entries,
// ledger lines, request-log rows, webhook endpoints and deliveries.
for (let i = 0; i < 5; i++) await createKey(test, { name: `paged key ${i}` });
const projects: string[] = [];
for (let i = 0; i < 4; i++) projects.push((await created('POST', '/client/projects', { name: `paged project ${i}` })).id);
const [memberProject] = projects as [string];
for (let i = 0; i < 4; i++) {
  const person = await addPerson(test, { role: 'member' });
  await created('POST', `/client/projects/${memberProject}/members`, { personId: person.personId, role: 'viewer' });
}
for (let i = 0; i < 4; i++) {
  const organization = await identity.organizations.create({ name: `paged organisation ${i}` });
  await identity.memberships.add({ organizationId: organization.id, personId: ownerPersonId, role: 'member' });
}
for (let i = 0; i < 5; i++) {
  await db.query(
    `INSERT INTO audit_log (event_id, organization_id, occurred_at, operation, method, path, params, actor_kind, actor_id, actor_label,
       credential_kind, credential_id, status, request_id)
     VALUES ($1, $2, now(), 'paging.check', 'POST', '/keys', '{}'::jsonb, 'person', $3, 'owner', 'session', $3, 201, $4)`,
    [randomUUID(), test.organizationId, ownerPersonId, `req_paging_${i}`],
  );
}
await test.call('GET', '/client/credits');
for (let i = 0; i < 5; i++) await created('POST', '/client/credits/topup', { amountUsd: 1, reference: `paging-${i}` });
for (let i = 0; i < 5; i++) {
  await db.query('INSERT INTO request_logs (id, organization_id, project_id, endpoint, status_code) VALUES ($1, $2, $3, $4, 200)', [
    `req_${randomUUID().replaceAll('-', '')}`,
    test.organizationId,
    test.defaultProjectId,
    '/v1/chat/completions',
  ]);
}

// Webhook endpoints, and deliveries of one of them: test deliveries to a name that never resolves (.invalid).
const webhooks: string[] = [];
for (let i = 0; i < 5; i++) webhooks.push((await created('POST', '/client/webhooks', { url: `https://hooks-${i}.example.invalid/in`, eventTypes: ['*'] })).id);
const [pagedWebhook] = webhooks as [string];
for (let i = 0; i < 5; i++) await created('POST', `/client/webhooks/${pagedWebhook}/test`, undefined);

interface ListCase {
  operation: string;
  path: string;
  maxLimit: number;
  /** Where the list's rows live: the table, its timestamp and tie-breaking columns, the rows the caller sees. */
  table: string;
  at: string;
  sortId: string;
  /** The id an item shows on the wire, as SQL over the table, and read from an item. */
  publicId: string;
  itemId: (item: Item) => string;
  where: string;
  params: unknown[];
  /** A well-formed cursor naming an id of another kind than the list's. */
  foreignId: string;
}

const LISTS: ListCase[] = [
  {
    operation: 'keys.list',
    path: '/client/keys',
    maxLimit: 200,
    table: 'api_keys',
    at: 'created_at',
    sortId: 'id',
    publicId: 'id::text',
    itemId: (item) => item.id,
    where: 'organization_id = $1',
    params: [test.organizationId],
    foreignId: 'req_0123',
  },
  {
    operation: 'projects.list',
    path: '/client/projects',
    maxLimit: 200,
    table: 'projects',
    at: 'created_at',
    sortId: 'id',
    publicId: 'id::text',
    itemId: (item) => item.id,
    where: 'organization_id = $1',
    params: [test.organizationId],
    foreignId: '42',
  },
  {
    operation: 'projects.members.list',
    path: `/client/projects/${memberProject}/members`,
    maxLimit: 200,
    table: 'project_members',
    at: 'created_at',
    sortId: 'person_id',
    publicId: 'person_id::text',
    itemId: (item) => item.personId,
    where: 'project_id = $1',
    params: [memberProject],
    foreignId: 'not-a-uuid',
  },
  {
    operation: 'organizations.list',
    path: '/client/organizations',
    maxLimit: 200,
    table: 'memberships',
    at: 'created_at',
    sortId: 'organization_id',
    publicId: 'organization_id::text',
    itemId: (item) => item.id,
    where: 'person_id = $1',
    params: [ownerPersonId],
    foreignId: '7',
  },
  {
    operation: 'audit.list',
    path: '/client/audit-log?operation=paging.check',
    maxLimit: 200,
    table: 'audit_log',
    at: 'occurred_at',
    sortId: 'id',
    publicId: 'event_id::text',
    itemId: (item) => item.id,
    where: "organization_id = $1 AND operation = 'paging.check'",
    params: [test.organizationId],
    foreignId: randomUUID(),
  },
  {
    operation: 'credits.statement',
    path: '/client/credits/statement?lens=payments',
    maxLimit: 500,
    table: 'credit_ledger',
    at: 'created_at',
    sortId: 'id',
    publicId: 'id::text',
    itemId: (item) => item.id,
    where: "organization_id = $1 AND kind = 'payment'",
    params: [test.organizationId],
    foreignId: 'abc',
  },
  {
    operation: 'webhooks.list',
    path: '/client/webhooks',
    maxLimit: 200,
    table: 'webhook_endpoints',
    at: 'created_at',
    sortId: 'id',
    publicId: 'id::text',
    itemId: (item) => item.id,
    where: 'organization_id = $1',
    params: [test.organizationId],
    foreignId: '12',
  },
  {
    operation: 'webhooks.deliveries.list',
    path: `/client/webhooks/${pagedWebhook}/deliveries`,
    maxLimit: 200,
    table: 'webhook_deliveries',
    at: 'created_at',
    sortId: 'id',
    publicId: 'id::text',
    itemId: (item) => item.id,
    where: 'endpoint_id = $1',
    params: [pagedWebhook],
    foreignId: 'msg_1',
  },
  {
    operation: 'requests.list',
    path: '/client/requests',
    maxLimit: 200,
    table: 'request_logs',
    at: 'created_at',
    sortId: 'id',
    publicId: 'id',
    itemId: (item) => item.id,
    where: 'organization_id = $1',
    params: [test.organizationId],
    foreignId: 'has spaces',
  },
];

/**
 * Gives a list's rows their instants two by two (each pair shares one, microseconds included), so
 * every page boundary meets ties in the timestamp that only the id can break.
 */
async function pairInstants(list: ListCase): Promise<void> {
  await db.query(
    `UPDATE ${list.table} AS t SET ${list.at} = '2026-03-01T00:00:00.000001Z'::timestamptz + ((n.rn - 1) / 2) * interval '1.000007 seconds'
     FROM (SELECT ${list.sortId} AS row_id, row_number() OVER (ORDER BY ${list.sortId}) AS rn FROM ${list.table} WHERE ${list.where}) n
     WHERE t.${list.sortId} = n.row_id AND ${list.where}`,
    list.params,
  );
}

/** Compares ids as the database orders them: row numbers as numbers, uuids and request ids as text. */
function compareIds(a: string, b: string): number {
  if (/^\d+$/.test(a) && /^\d+$/.test(b)) return BigInt(a) < BigInt(b) ? -1 : BigInt(a) > BigInt(b) ? 1 : 0;
  return a < b ? -1 : a > b ? 1 : 0;
}

/** The public ids of the list's rows, newest first, ties broken by the higher id: what the pages must give. */
async function expectedOrder(list: ListCase): Promise<string[]> {
  const { rows } = await db.query<{ at: string; sort_id: string; public_id: string }>(
    `SELECT to_char(${list.at} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US') AS at, ${list.sortId}::text AS sort_id, ${list.publicId} AS public_id
     FROM ${list.table} WHERE ${list.where}`,
    list.params,
  );
  return rows.sort((a, b) => (a.at !== b.at ? (a.at < b.at ? 1 : -1) : -compareIds(a.sort_id, b.sort_id))).map((row) => row.public_id);
}

for (const list of LISTS) {
  t.test(`${list.operation}: pages of two visit every row exactly once, newest first, ties in the timestamp broken by id`, async (t) => {
    await pairInstants(list);
    const expected = await expectedOrder(list);
    t.ok(expected.length >= 5, `${expected.length} rows to page through`);
    const { items, pageSizes } = await pageThrough(test, list.path, { limit: 2 });
    t.same(items.map(list.itemId), expected);
    t.equal(pageSizes.length, Math.ceil(expected.length / 2), 'full pages until the last');
    t.ok(
      pageSizes.slice(0, -1).every((size) => size === 2),
      'no short page before the last',
    );
  });

  t.test(`${list.operation}: a forged or garbled cursor is a 400 naming cursor`, async (t) => {
    const separator = list.path.includes('?') ? '&' : '?';
    const cursors = [
      'not a cursor!',
      Buffer.from('{"at":').toString('base64url'),
      encodeCursor({ at: '2026-02-30T00:00:00.000000Z', id: '1' }),
      encodeCursor({ at: '2026-03-01T00:00:00.000001Z', id: list.foreignId }),
    ];
    for (const cursor of cursors) {
      const response = await test.call('GET', `${list.path}${separator}cursor=${encodeURIComponent(cursor)}`);
      assertEnvelope(t, response, 400, { code: 'invalid_parameter', param: 'cursor' });
    }
  });

  t.test(`${list.operation}: a limit over ${list.maxLimit} is a 400 naming limit`, async (t) => {
    const separator = list.path.includes('?') ? '&' : '?';
    assertEnvelope(t, await test.call('GET', `${list.path}${separator}limit=${list.maxLimit + 1}`), 400, { code: 'invalid_parameter', param: 'limit' });
    t.equal((await test.call('GET', `${list.path}${separator}limit=${list.maxLimit}`)).statusCode, 200, `limit ${list.maxLimit} is accepted`);
  });
}

t.test('credits.statement: 100 lines a page unless the caller asks otherwise', async (t) => {
  for (let i = 0; i < 100; i++) await created('POST', '/client/credits/topup', { amountUsd: 0.01, reference: `default-page-${i}` });
  const page = (await test.call('GET', '/client/credits/statement?lens=payments')).json() as Item;
  t.equal(page.data.length, 100);
  t.type(page.nextCursor, 'string');
});

t.test('projects.list: a member pages through exactly the projects they have a role on, with no short page', async (t) => {
  const member = await addPerson(test, { role: 'member' });
  const theirs = projects.slice(1);
  for (const projectId of theirs) await created('POST', `/client/projects/${projectId}/members`, { personId: member.personId, role: 'developer' });
  const { items, pageSizes } = await pageThrough(test, '/client/projects', { limit: 2, token: member.token });
  t.same(items.map((item) => item.id).sort(), [...theirs].sort());
  t.same(pageSizes, [2, 1]);
});

t.test('keys.list: a key of one project pages through its own project only', async (t) => {
  const reader = await createKey(test, { name: 'reader', projectId: memberProject, scopes: ['keys:read'] });
  for (let i = 0; i < 2; i++) await createKey(test, { name: `project key ${i}`, projectId: memberProject });
  const { items } = await pageThrough(test, '/client/keys', { limit: 1, token: reader.key });
  t.equal(items.length, 3);
  t.ok(items.every((item) => item.projectId === memberProject));
});

t.test('the OpenAPI document shows limit, cursor and nextCursor for every list', async (t) => {
  const doc = (await test.call('GET', '/client/openapi.json', { token: null })).json() as Record<string, any>;
  const resolve = (schema: any) => (schema?.$ref ? doc.components.schemas[schema.$ref.split('/').pop()] : schema);
  const operations = new Map(
    Object.values(doc.paths)
      .flatMap((methods) => Object.values(methods as Record<string, Item>))
      .map((operation) => [operation.operationId, operation]),
  );
  for (const list of LISTS) {
    const operation = operations.get(list.operation);
    if (!operation) {
      t.fail(`${list.operation} is not in the document`);
      continue;
    }
    const query = (operation.parameters as Item[]).filter((p) => p.in === 'query').map((p) => p.name);
    t.ok(query.includes('limit') && query.includes('cursor'), `${list.operation}: limit and cursor`);
    const body = resolve(operation.responses['200'].content['application/json'].schema);
    t.ok(body?.properties?.nextCursor, `${list.operation}: nextCursor`);
  }
});
