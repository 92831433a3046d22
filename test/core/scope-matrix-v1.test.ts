import t from 'tap';
import { randomUUID } from 'node:crypto';
import type { LightMyRequestResponse } from 'fastify';
import type { ResourceDeclaration } from '../../core/identity/authorization.ts';
import { SCOPES } from '../../core/identity/scopes.ts';
import type { V1Route } from '../../core/http/v1-surface.ts';
import { createKey } from '../helpers/app.ts';
import { ACCESS_REFUSALS, scopeMatrixApp } from '../helpers/scope-matrix-app.ts';

// The scope matrix (test/helpers/scope-matrix-app.ts): the /v1 surface.
const matrix = await scopeMatrixApp(t);
const { test, envelopeCode, keyWithout, allScopesKey, projectB, keyOfA, keyOfB, resourceOfA } = matrix;

// The /v1 surface: every route GET /v1 lists, whichever plugin mounted it (core/http/v1-surface.ts
// collects them with their route config). Spec (Authentication 2): /v1 routes require `inference`;
// API keys only (README: a session there would be billed to no key). A route declaring a resource
// (core/http/route-resources.ts) is aimed at project A's record like the operations above.
const v1Routes: readonly V1Route[] = test.app.svc.v1Routes;
const v1Label = (route: V1Route, response: LightMyRequestResponse) => `${route.method} ${route.path} -> ${response.statusCode} ${response.body.slice(0, 200)}`;
const v1Resources = (route: V1Route): ResourceDeclaration[] => (route.auth ? [route.auth.resource ?? []].flat() : []) as ResourceDeclaration[];
async function v1Request(route: V1Route, token: string | null, values: Record<string, string> = {}): Promise<LightMyRequestResponse> {
  const url = route.path.replace(/\{(\w+)\}/g, (_m, name: string) => encodeURIComponent(values[name] ?? randomUUID()));
  // A resource named in the body (a batch's input file) is sent there.
  const inBody = v1Resources(route).filter((declaration) => declaration.in === 'body');
  const body = inBody.length > 0 ? Object.fromEntries(inBody.map((declaration) => [declaration.field, values[declaration.field] ?? randomUUID()])) : undefined;
  return test.call(route.method, url, { token, ...(body ? { body } : {}) });
}
/** The code of a refusal: the envelope's, or for a route speaking Anthropic's API (its own error shape, no code) its error type. */
const v1Refusal = (response: LightMyRequestResponse) => envelopeCode(response) ?? (response.json() as { error?: { type?: string } }).error?.type;
const noInference = keyWithout.get('inference') ?? (await createKey(test, { name: 'all but inference (v1)', scopes: SCOPES.filter((s) => s !== 'inference') })).key;

t.test('/v1: the matrix sees every gateway route, the files plugin’s included', async (t) => {
  const listed = new Set(v1Routes.map((route) => `${route.method} ${route.path}`));
  for (const endpoint of ['GET /v1/models', 'POST /v1/chat/completions', 'POST /v1/files', 'GET /v1/files', 'GET /v1/files/{id}', 'DELETE /v1/files/{id}', 'GET /v1/files/{id}/content']) {
    t.ok(listed.has(endpoint), endpoint);
  }
  const index = (await test.call('GET', '/v1', { token: allScopesKey })).json() as { endpoints: string[] };
  t.same([...index.endpoints].sort(), [...listed].sort(), 'GET /v1 lists exactly these');
});

t.test('/v1: every route declares the inference scope', async (t) => {
  for (const route of v1Routes) t.equal(route.auth === false ? false : route.auth?.scope, 'inference', `${route.method} ${route.path}`);
});

t.test('/v1: every route answers 401 without a credential and to an unknown key', async (t) => {
  for (const route of v1Routes) {
    t.equal((await v1Request(route, null)).statusCode, 401, `${route.method} ${route.path}`);
    t.equal((await v1Request(route, `svc_live_${'0'.repeat(40)}`)).statusCode, 401, `${route.method} ${route.path}`);
  }
});

t.test("/v1: every route answers a person's session 401 api_key_required", async (t) => {
  for (const route of v1Routes) {
    const response = await v1Request(route, test.ownerToken);
    t.equal(response.statusCode, 401, v1Label(route, response));
    t.ok(['api_key_required', 'authentication_error'].includes(v1Refusal(response) ?? ''), `${route.method} ${route.path}: api_key_required`);
  }
});

t.test('/v1: every route answers 403 missing_scope to a key holding every scope but inference', async (t) => {
  for (const route of v1Routes) {
    const response = await v1Request(route, noInference);
    t.equal(response.statusCode, 403, v1Label(route, response));
    t.ok(['missing_scope', 'permission_error'].includes(v1Refusal(response) ?? ''), `${route.method} ${route.path}: missing_scope`);
  }
});

t.test('/v1: every route lets a key holding only inference past authorisation', async (t) => {
  const only = (await createKey(test, { name: 'only inference (v1)', scopes: ['inference'] })).key;
  for (const route of v1Routes) {
    const response = await v1Request(route, only);
    t.notOk([401, 403].includes(response.statusCode), v1Label(route, response));
    t.ok(response.statusCode < 500, `${route.method} ${route.path}: no server error`);
  }
});

t.test("/v1: every route declaring a resource refuses keys of another project, even holding projects:write, with the resource's 404; a key of A is let through", async (t) => {
  const ofBWithEveryScope = (await createKey(test, { name: 'of B, every scope (v1)', projectId: projectB, scopes: [...SCOPES] })).key;
  const declaring = v1Routes.filter((route) => v1Resources(route).length > 0);
  t.ok(declaring.length >= 3, `${declaring.length} routes declare a resource`);
  for (const route of declaring) {
    const values: Record<string, string> = {};
    for (const declaration of v1Resources(route)) values[declaration.field] = await resourceOfA(declaration);
    for (const [who, token] of [
      ['key of B', keyOfB],
      ['key of B holding projects:write', ofBWithEveryScope],
    ] as const) {
      const response = await v1Request(route, token, values);
      t.ok(response.statusCode === 404 && ACCESS_REFUSALS.includes(envelopeCode(response) ?? ''), `${who}: ${v1Label(route, response)}`);
    }
    const allowed = await v1Request(route, keyOfA, values);
    t.ok(![401, 403, 404].includes(allowed.statusCode) && allowed.statusCode < 500, `key of A: ${v1Label(route, allowed)}`);
  }
});

// The same matrix at /mcp: every operation as a tool, for keys and people's sessions alike. Using
