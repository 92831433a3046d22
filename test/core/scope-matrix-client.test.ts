import { readdirSync, readFileSync } from 'node:fs';
import t from 'tap';
import { MANAGEMENT_PREFIXES } from '../../core/http/mount-operations.ts';
import { SCOPES } from '../../core/identity/scopes.ts';
import { sampleBody, sampleBodyIsValid } from '../fixtures/operation-inputs.ts';
import { declaredAccess, mountMatrix, SPEC_ACCESS, scopeMatrixApp, specAccess, specPath } from '../helpers/scope-matrix-app.ts';

// The scope matrix (test/helpers/scope-matrix-app.ts): the spec's table against the registry, and the /client mount.
const matrix = await scopeMatrixApp(t);
const { operations } = matrix;

t.test('the matrix covers at least the keys, projects and account operations', async (t) => {
  const names = new Set(operations.map((op) => op.name));
  for (const name of [
    'keys.list',
    'keys.create',
    'keys.get',
    'keys.update',
    'keys.delete',
    'projects.list',
    'projects.create',
    'projects.get',
    'projects.update',
    'projects.delete',
    'projects.members.list',
    'projects.members.add',
    'projects.members.update',
    'projects.members.remove',
    'account.whoami',
    'organizations.list',
    'organizations.setDefault',
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

t.test("every operation is in the spec's scope table and declares the access the table gives it", async (t) => {
  for (const operation of operations) {
    t.equal(declaredAccess(operation), specAccess(operation), `${operation.name}: ${operation.method} ${specPath(operation)}`);
  }
});

t.test("every route of the spec's scope table exists", async (t) => {
  const routes = new Set(operations.map((op) => `${op.method} ${specPath(op)}`));
  for (const { method, path } of SPEC_ACCESS) t.ok(routes.has(`${method} ${path}`), `${method} ${path}`);
});

mountMatrix(t, matrix, '/client');

t.test('the matrix is split without gaps: each management mount is checked by exactly one file', async (t) => {
  const directory = new URL('.', import.meta.url);
  const checked = new Map<string, string[]>();
  for (const file of readdirSync(directory).filter((name) => /^scope-matrix.*\.test\.ts$/.test(name))) {
    for (const [, prefix] of readFileSync(new URL(file, directory), 'utf8').matchAll(/mountMatrix\(t, matrix, '([^']+)'\)/g)) {
      checked.set(prefix!, [...(checked.get(prefix!) ?? []), file]);
    }
  }
  t.same([...checked.keys()].sort(), [...MANAGEMENT_PREFIXES].sort(), 'every mount, and no other');
  for (const [prefix, files] of checked) t.equal(files.length, 1, `${prefix}: ${files.join(', ')}`);
});
