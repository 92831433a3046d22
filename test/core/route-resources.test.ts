import { randomUUID } from 'node:crypto';
import t from 'tap';
import { authorizedKey, authorizedProject, authorizedRecord, type RecordKind, type RouteResourceDeclaration } from '../../core/identity/authorization.ts';
import { SCOPES } from '../../core/identity/scopes.ts';
import { type CodesOf, defineErrorCodes } from '../../core/kernel/error-catalogue.ts';
import { definePlugin } from '../../core/kernel/plugin.ts';
import { inferencePlugin } from '../../plugins/inference/index.ts';
import { keysPlugin } from '../../plugins/keys/index.ts';
import { manifest as defaultManifest } from '../../plugins/index.ts';
import { projectsPlugin } from '../../plugins/projects/index.ts';
import { allPlugins, buildTestApp, createKey } from '../helpers/app.ts';

/**
 * The raw-route resource seam (core/http/route-resources.ts): a route outside the operation registry
 * declares `config.auth.resource` and the kernel resolves it with `authorizeResources`, after the
 * body is parsed and before the handler, exactly as for operations; and the /v1 surface seams
 * (core/http/v1-surface.ts): every plugin's `surface: 'v1'` route is listed by `GET /v1` and answers
 * with the rate-limit headers.
 */

t.setTimeout(120_000);

// A plugin's own 404, catalogued beside it as a third-party plugin would.
const RAW_NOTE_ERRORS = defineErrorCodes('raw-notes', { raw_note_not_found: { status: 404, type: 'not_found_error', message: 'No such note' } });

declare module '../../core/kernel/error-catalogue.ts' {
  interface ErrorCodes extends CodesOf<typeof RAW_NOTE_ERRORS> {}
}

interface Note {
  text: string;
}

/** Notes by id, each of a project; `lookups` counts what `find` was asked. */
const notes = new Map<string, { record: Note; projectId: string }>();
let lookups = 0;
const noteKind: RecordKind<Note> = {
  name: 'note',
  notFound: 'raw_note_not_found',
  async find(_organizationId, id) {
    lookups += 1;
    return notes.get(id) ?? null;
  },
};

const v1 = (resource?: RouteResourceDeclaration) => ({ surface: 'v1' as const, auth: { scope: 'inference' as const, ...(resource ? { resource } : {}) } });

/** Raw routes of every kind of declaration: a record by path, a project in the body, a key by path, none. */
const rawNotesPlugin = definePlugin({
  name: 'raw-notes',
  description: 'Raw routes declaring resources',
  routes(app) {
    const byId = { kind: noteKind, access: 'read' as const, in: 'path' as const, field: 'id' };
    app.get('/v1/raw-notes/:id', { config: v1(byId) }, async (request) => {
      const { record, project } = authorizedRecord(request.authorization!, noteKind);
      return { text: record.text, projectId: project?.id };
    });
    app.get('/v1/raw-notes/:id/own', { config: v1({ ...byId, keyOwnProjectOnly: true }) }, async (request) => ({ text: authorizedRecord(request.authorization!, noteKind).record.text }));
    app.post('/v1/raw-notes', { config: v1({ kind: 'project', access: 'write', in: 'body', field: 'projectId' }) }, async (request) => ({
      projectId: authorizedProject(request.authorization!).id,
    }));
    app.get('/v1/raw-keys/:keyId', { config: v1({ kind: 'key', access: 'read', in: 'path', field: 'keyId' }) }, async (request) => ({ keyId: authorizedKey(request.authorization!).id }));
    app.get('/v1/raw-plain', { config: v1() }, async (request) => ({ authorization: request.authorization }));
    app.get('/raw-management/plain', { config: { surface: 'client', auth: { scope: null } } }, async () => ({ ok: true }));
  },
});

const test = await buildTestApp(t, { manifest: [...defaultManifest, rawNotesPlugin], plugins: { ...allPlugins(), 'raw-notes': {} } });
const projectA = test.defaultProjectId;
const projectB = ((await test.call('POST', '/client/projects', { body: { name: 'raw notes B' } })).json() as { id: string }).id;
const keyOfA = (await createKey(test, { name: 'of A', projectId: projectA, scopes: ['inference'] })).key;
const keyOfB = (await createKey(test, { name: 'of B', projectId: projectB, scopes: ['inference'] })).key;
const everyScopeOfB = (await createKey(test, { name: 'of B, every scope', projectId: projectB, scopes: [...SCOPES] })).key;
const noteOfA = randomUUID();
notes.set(noteOfA, { record: { text: 'a note of A' }, projectId: projectA });

t.test('a declared record is resolved before the handler, which reads it and its project from request.authorization', async (t) => {
  const response = await test.call('GET', `/v1/raw-notes/${noteOfA}`, { token: keyOfA });
  t.equal(response.statusCode, 200);
  t.same(response.json(), { text: 'a note of A', projectId: projectA });
});

t.test("another project's key, and an id naming nothing, get the kind's own 404", async (t) => {
  for (const [who, token, id] of [
    ['key of B', keyOfB, noteOfA],
    ['unknown id', keyOfA, randomUUID()],
    ['an id of no shape', keyOfA, 'no-such-note'],
  ] as const) {
    const response = await test.call('GET', `/v1/raw-notes/${id}`, { token });
    t.equal(response.statusCode, 404, who);
    t.same(response.json(), { error: { message: `No note ${id}`, type: 'not_found_error', code: 'raw_note_not_found', param: 'id' } }, who);
  }
});

t.test('keyOwnProjectOnly keeps a key holding projects:write out of another project’s records', async (t) => {
  t.equal((await test.call('GET', `/v1/raw-notes/${noteOfA}`, { token: everyScopeOfB })).statusCode, 200, 'projects:write reaches every project');
  const confined = await test.call('GET', `/v1/raw-notes/${noteOfA}/own`, { token: everyScopeOfB });
  t.equal(confined.statusCode, 404);
  t.match(confined.json(), { error: { code: 'raw_note_not_found' } });
  t.equal((await test.call('GET', `/v1/raw-notes/${noteOfA}/own`, { token: keyOfA })).statusCode, 200, 'its own project’s');
});

t.test('the credential and its scope are checked first: nothing is looked up for a refused caller', async (t) => {
  const before = lookups;
  t.equal((await test.call('GET', `/v1/raw-notes/${noteOfA}`, { token: null })).statusCode, 401, 'no key');
  const noInference = (await createKey(test, { name: 'no inference', scopes: ['usage:read'] })).key;
  const refused = await test.call('GET', `/v1/raw-notes/${noteOfA}`, { token: noInference });
  t.equal(refused.statusCode, 403);
  t.match(refused.json(), { error: { code: 'missing_scope' } });
  t.equal(lookups, before);
});

t.test('a resource in the JSON body is resolved once the body is parsed', async (t) => {
  const post = (token: string, body: unknown) => test.call('POST', '/v1/raw-notes', { token, body });
  t.same((await post(keyOfA, { projectId: projectA })).json(), { projectId: projectA });
  const other = await post(keyOfA, { projectId: projectB });
  t.equal(other.statusCode, 404);
  t.match(other.json(), { error: { code: 'project_not_found', param: 'projectId' } });
  const malformed = await post(keyOfA, { projectId: 'project-a' });
  t.equal(malformed.statusCode, 400, 'a project id that is not a UUID');
  t.match(malformed.json(), { error: { code: 'invalid_parameter', param: 'projectId' } });
  const unparsable = await test.call('POST', '/v1/raw-notes', { token: keyOfA, body: '{"projectId":', headers: { 'content-type': 'application/json' } });
  t.equal(unparsable.statusCode, 400, 'a body that is not JSON never reaches the check');
  t.match(unparsable.json(), { error: { code: 'invalid_json' } });
});

t.test('a key resource by path resolves through its project', async (t) => {
  const ofA = await createKey(test, { name: 'looked up', projectId: projectA });
  t.same((await test.call('GET', `/v1/raw-keys/${ofA.id}`, { token: keyOfA })).json(), { keyId: ofA.id });
  t.equal((await test.call('GET', `/v1/raw-keys/${ofA.id}`, { token: keyOfB })).statusCode, 404);
  t.equal((await test.call('GET', '/v1/raw-keys/not-a-uuid', { token: keyOfA })).statusCode, 400);
});

t.test('a route that declares no resource has request.authorization null', async (t) => {
  t.same((await test.call('GET', '/v1/raw-plain', { token: keyOfA })).json(), { authorization: null });
});

t.test("GET /v1 lists every plugin's /v1 routes, and the kernel keeps them with their declarations", async (t) => {
  const listed = (await test.call('GET', '/v1', { token: keyOfA })).json() as { endpoints: string[] };
  for (const endpoint of ['GET /v1/raw-notes/{id}', 'POST /v1/raw-notes', 'GET /v1/models', 'POST /v1/chat/completions']) {
    t.ok(listed.endpoints.includes(endpoint), endpoint);
  }
  t.notOk(listed.endpoints.includes('GET /raw-management/plain'), 'not a route of another surface');
  const route = test.app.svc.v1Routes.find((r) => r.method === 'GET' && r.path === '/v1/raw-notes/{id}/own');
  t.match(route?.auth, { scope: 'inference', resource: { kind: noteKind, keyOwnProjectOnly: true } });
});

t.test("every answer of a plugin's /v1 route carries the rate-limit headers; other surfaces' answers do not", async (t) => {
  for (const [what, url] of [
    ['a success', `/v1/raw-notes/${noteOfA}`],
    ['a 404 of the resource check', `/v1/raw-notes/${randomUUID()}`],
  ] as const) {
    const response = await test.call('GET', url, { token: keyOfA });
    t.equal(response.headers['x-ratelimit-limit-requests'], '600', what);
    t.ok(response.headers['x-ratelimit-remaining-requests'], what);
  }
  const management = await test.call('GET', '/raw-management/plain', { token: keyOfA });
  t.equal(management.statusCode, 200);
  t.equal(management.headers['x-ratelimit-limit-requests'], undefined);
});

t.test('without a metering plugin there are no limits and no headers', async (t) => {
  const bare = await buildTestApp(t, {
    manifest: [projectsPlugin, keysPlugin, inferencePlugin, rawNotesPlugin],
    plugins: { projects: {}, keys: {}, inference: {}, 'raw-notes': {} },
  });
  const key = (await createKey(bare, { name: 'bare', scopes: ['inference'] })).key;
  const response = await bare.call('GET', '/v1/raw-plain', { token: key });
  t.equal(response.statusCode, 200);
  t.equal(response.headers['x-ratelimit-limit-requests'], undefined);
});
