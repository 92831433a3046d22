import type { LightMyRequestResponse } from 'fastify';
import t from 'tap';
import { MANAGEMENT_PREFIXES } from '../../core/http/mount-operations.ts';
import type { AnyOperation } from '../../core/operations.ts';
import { SCOPES, type Scope } from '../../core/scopes.ts';
import { Tokens } from '../../core/tokens.ts';
import { fillPath, sampleBody, sampleBodyIsValid, sampleQuery } from '../fixtures/operation-inputs.ts';
import { buildTestApp, createKey } from '../helpers/app.ts';

/**
 * The scope matrix: every operation in the registry, on both management mounts, against a request
 * without a credential (401), a key holding every scope but the one it needs (403 missing_scope),
 * and credentials that hold it (neither 401 nor 403).
 */
const test = await buildTestApp(t);
const operations: AnyOperation[] = test.app.svc.container.resolve(Tokens.Operations).list();

const allScopesKey = (await createKey(test, { name: 'all scopes', scopes: [...SCOPES] })).key;
const neededScopes = [...new Set(operations.map((op) => op.scope).filter((s): s is Scope => s !== null))];
const keyWithout = new Map<Scope, string>();
for (const scope of neededScopes) {
  const created = await createKey(test, { name: `all but ${scope}`, scopes: SCOPES.filter((s) => s !== scope) });
  keyWithout.set(scope, created.key);
}

function request(prefix: string, operation: AnyOperation, token: string | null): Promise<LightMyRequestResponse> {
  const body = sampleBody(operation);
  return test.call(operation.method, prefix + fillPath(operation) + sampleQuery(operation), { token, ...(body !== undefined ? { body } : {}) });
}

const label = (prefix: string, operation: AnyOperation, response: LightMyRequestResponse) =>
  `${operation.name}: ${operation.method} ${prefix}${operation.path} -> ${response.statusCode} ${response.body.slice(0, 200)}`;

function envelopeCode(response: LightMyRequestResponse): string | undefined {
  try {
    return (response.json() as { error?: { code?: string } }).error?.code;
  } catch {
    return undefined;
  }
}

t.test('the matrix covers at least the keys, projects and account operations', async (t) => {
  const names = new Set(operations.map((op) => op.name));
  for (const name of [
    'keys.list', 'keys.create', 'keys.get', 'keys.update', 'keys.delete',
    'projects.list', 'projects.create', 'projects.get', 'projects.update', 'projects.delete',
    'projects.members.list', 'projects.members.add', 'projects.members.update', 'projects.members.remove',
    'account.whoami', 'organizations.list', 'organizations.setDefault',
  ]) {
    t.ok(names.has(name), `${name} is registered`);
  }
});

t.test('every operation with a body has a valid sample body (add new ones to BODY_OVERRIDES)', async (t) => {
  for (const operation of operations) {
    if (operation.body) t.ok(sampleBodyIsValid(operation), `${operation.name}: ${JSON.stringify(sampleBody(operation))}`);
  }
});

t.test('every operation names a scope the spec lists, or null', async (t) => {
  for (const operation of operations) {
    t.ok(operation.scope === null || (SCOPES as readonly string[]).includes(operation.scope), `${operation.name}: ${String(operation.scope)}`);
  }
});

for (const prefix of MANAGEMENT_PREFIXES) {
  t.test(`${prefix}: every operation answers 401 without a credential`, async (t) => {
    for (const operation of operations) {
      const response = await request(prefix, operation, null);
      t.equal(response.statusCode, 401, label(prefix, operation, response));
    }
  });

  t.test(`${prefix}: every operation answers 401 to an unknown key`, async (t) => {
    for (const operation of operations) {
      const response = await request(prefix, operation, `svc_live_${'0'.repeat(40)}`);
      t.equal(response.statusCode, 401, label(prefix, operation, response));
    }
  });

  t.test(`${prefix}: every scoped operation answers 403 missing_scope to a key holding every other scope`, async (t) => {
    for (const operation of operations) {
      if (operation.scope === null) continue;
      const response = await request(prefix, operation, keyWithout.get(operation.scope) ?? null);
      t.equal(response.statusCode, 403, label(prefix, operation, response));
      t.equal(envelopeCode(response), 'missing_scope', `${operation.name}: code missing_scope`);
    }
  });

  t.test(`${prefix}: every owner-only operation answers 403 owner_required to a key holding every scope`, async (t) => {
    for (const operation of operations.filter((op) => op.ownerOnly)) {
      const response = await request(prefix, operation, allScopesKey);
      t.equal(response.statusCode, 403, label(prefix, operation, response));
      t.equal(envelopeCode(response), 'owner_required', `${operation.name}: code owner_required`);
    }
  });

  t.test(`${prefix}: every operation lets a key holding its scope past authorisation`, async (t) => {
    for (const operation of operations.filter((op) => !op.ownerOnly)) {
      const response = await request(prefix, operation, allScopesKey);
      t.notOk([401, 403].includes(response.statusCode), label(prefix, operation, response));
      t.ok(response.statusCode < 500, `${operation.name}: no server error`);
    }
  });

  t.test(`${prefix}: every operation lets the owner's session past authorisation`, async (t) => {
    for (const operation of operations) {
      const response = await request(prefix, operation, test.ownerToken);
      t.notOk([401, 403].includes(response.statusCode), label(prefix, operation, response));
      t.ok(response.statusCode < 500, `${operation.name}: no server error`);
    }
  });

  t.test(`${prefix}: a key holding only the needed scope is let past authorisation`, async (t) => {
    for (const scope of neededScopes) {
      const only = (await createKey(test, { name: `only ${scope}`, scopes: [scope] })).key;
      for (const operation of operations.filter((op) => op.scope === scope)) {
        const response = await request(prefix, operation, only);
        t.not(response.statusCode, 401, label(prefix, operation, response));
        t.not(envelopeCode(response), 'missing_scope', `${operation.name}: not refused for its scope`);
      }
    }
  });
}

t.test('the management index answers 401 without a credential on both mounts', async (t) => {
  for (const prefix of MANAGEMENT_PREFIXES) {
    t.equal((await test.call('GET', `${prefix}/`, { token: null })).statusCode, 401, prefix);
  }
});
