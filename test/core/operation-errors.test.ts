import t from 'tap';
import { z } from 'zod';
import type { SessionCredential } from '../../core/identity/credential.ts';
import { catalogueEntries, defineErrorCodes, errorEntry } from '../../core/kernel/error-catalogue.ts';
import { PROJECT_ERRORS } from '../../plugins/projects/project-errors.ts';
// Every in-tree plugin, so the well-formedness test sees every catalogued code.
import '../../plugins/index.ts';
import { ApiError } from '../../core/kernel/errors.ts';
import { operationErrors, UndeclaredErrorCode } from '../../core/operations/operation-errors.ts';
import { defineOperation, OperationRegistry } from '../../core/operations/operations.ts';
import type { IdentityStores } from '../../core/ports/identity.ts';

const owner: SessionCredential = {
  kind: 'session',
  sessionId: 's',
  personId: 'p',
  email: 'owner@example.com',
  organizationId: 'o',
  role: 'owner',
  scopes: new Set(['projects:write']),
  csrfTokenHash: null,
};

const ctx = {
  credential: owner,
  requestId: 'req_1',
  logger: { child: () => ctx.logger } as never,
  transaction: () => Promise.reject(new Error('no transaction in this test')),
};

/** A sample operation: a body, a project it writes, one code of its own, and whatever `throws` says. */
const sample = (throws: () => never) =>
  defineOperation({
    name: 'samples.archive',
    method: 'POST',
    path: '/samples/:id/archive',
    summary: 'Archive a sample',
    readOnly: false,
    scope: 'projects:write',
    params: z.strictObject({ id: z.string() }),
    body: z.strictObject({ reason: z.string() }),
    output: z.object({ ok: z.boolean() }),
    errors: ['project_not_empty'],
    async handler() {
      throws();
    },
  });

const registry = (checkDeclaredErrors: boolean) => {
  const operations = new OperationRegistry({ identity: {} as IdentityStores });
  operations.checkDeclaredErrors = checkDeclaredErrors;
  return operations;
};
const raw = { params: { id: 'x' }, query: {}, body: { reason: 'done' } };

t.test('operationErrors lists the declared codes and the ones the declaration implies', async (t) => {
  const withResource = { ...sample(() => undefined as never), resource: { kind: 'project', access: 'write', in: 'path', field: 'id' } as const };
  const errors = operationErrors(withResource);
  const codes = errors.map((e) => e.code);
  t.ok(codes.includes('project_not_empty'), 'declared');
  for (const implied of [
    'missing_api_key',
    'invalid_session',
    'csrf_failed',
    'missing_scope',
    'invalid_parameter',
    'unknown_field',
    'invalid_body',
    'missing_body',
    'invalid_json',
    'project_not_found',
    'project_role_insufficient',
  ]) {
    t.ok(codes.includes(implied), `implied: ${implied}`);
  }
  t.notOk(codes.includes('owner_required'), 'not owner-only');
  t.notOk(codes.includes('unexpected_body'), 'it takes a body');
  t.notOk(codes.includes('key_not_found'), 'it declares no key');
  t.same(
    errors.find((e) => e.code === 'project_not_empty'),
    { status: 409, code: 'project_not_empty', type: 'conflict_error', message: PROJECT_ERRORS.project_not_empty.message },
    'status, type and default message from the catalogue',
  );
  t.same(
    errors.map((e) => e.status),
    errors.map((e) => e.status).sort((a, b) => a - b),
    'ordered by status',
  );
  t.equal(new Set(codes).size, codes.length, 'each code once');
});

t.test('an undeclared code escaping an operation fails loudly when the check is on', async (t) => {
  const undeclared = sample(() => {
    throw new ApiError('default_project');
  });
  const error = await registry(true)
    .run(undeclared, raw, ctx)
    .catch((e: unknown) => e);
  t.ok(error instanceof UndeclaredErrorCode, 'refused');
  t.match((error as Error).message, /samples\.archive answered 'default_project'/);
  t.ok((error as Error).cause instanceof ApiError, 'the real answer is the cause');

  await t.rejects(registry(false).run(undeclared, raw, ctx), { code: 'default_project' }, 'off (production): the answer goes out as it is');
});

t.test('declared and implied codes pass the check', async (t) => {
  const declared = sample(() => {
    throw new ApiError('project_not_empty');
  });
  await t.rejects(registry(true).run(declared, raw, ctx), { code: 'project_not_empty', status: 409 }, 'declared');
  await t.rejects(registry(true).run(declared, { ...raw, body: { reason: 'x', extra: 1 } }, ctx), { code: 'unknown_field', status: 400 }, 'implied by the body');
  await t.rejects(registry(true).run(declared, { ...raw, body: undefined }, ctx), { code: 'missing_body' }, 'implied: the body is required');
  const plain = new Error('not an ApiError');
  await t.rejects(
    registry(true).run(
      sample(() => {
        throw plain;
      }),
      raw,
      ctx,
    ),
    plain,
    'other errors are not the check’s business',
  );
});

t.test('an optional body may be left out, but a JSON null sent as the body is refused invalid_body', async (t) => {
  const optional = defineOperation({
    name: 'samples.touch',
    method: 'POST',
    path: '/samples/:id/touch',
    summary: 'Touch a sample',
    readOnly: false,
    scope: null,
    params: z.strictObject({ id: z.string() }),
    body: z.strictObject({ note: z.string().optional() }),
    bodyRequired: false,
    output: z.object({ note: z.string().nullable() }),
    async handler({ body }) {
      return { note: body.note ?? null };
    },
  });
  t.same(await registry(true).run(optional, { ...raw, body: undefined }, ctx), { note: null }, 'left out');
  t.same(await registry(true).run(optional, { ...raw, body: { note: 'hi' } }, ctx), { note: 'hi' }, 'sent');
  await t.rejects(registry(true).run(optional, { ...raw, body: null }, ctx), { code: 'invalid_body', status: 400 }, 'null');
});

t.test('ApiError takes its status and type from the catalogue', async (t) => {
  const error = new ApiError('project_name_taken', 'A project named "x" already exists', { param: 'name' });
  t.same(error.toEnvelope(), { error: { message: 'A project named "x" already exists', type: 'conflict_error', code: 'project_name_taken', param: 'name' } });
  t.equal(error.status, 409);
  t.equal(new ApiError('key_disabled').message, errorEntry('key_disabled').message, 'the default message');
  const conflict = new ApiError('key_revoked_conflict');
  t.same([conflict.status, conflict.code, conflict.catalogued], [409, 'key_revoked', 'key_revoked_conflict'], 'a wire code kept for compatibility');
  // @ts-expect-error an uncatalogued code does not compile
  t.throws(() => new ApiError('not_a_code'), /not catalogued/);
});

t.test('every catalogue entry is well formed', async (t) => {
  const entries = catalogueEntries();
  t.ok(entries.some((e) => e.owner === 'core') && entries.some((e) => e.owner === 'projects'), "the kernel's codes and a plugin's");
  for (const { code, entry } of entries) {
    t.match(code, /^[a-z][a-z_]*[a-z]$/, `${code}: snake_case`);
    t.ok(entry.status >= 400 && entry.status < 600, `${code}: an error status`);
    t.ok(entry.message.length > 0, `${code}: a default message`);
  }
});

t.test('a plugin catalogues its own codes, and may not take one another owner has', async (t) => {
  t.equal(catalogueEntries().find((e) => e.code === 'project_name_taken')?.owner, 'projects', 'defined by the projects plugin');
  const mine = defineErrorCodes('notes', { note_refused: { status: 409, type: 'conflict_error', message: 'The note was refused' } });
  t.equal(errorEntry('note_refused' as never).status, 409, 'known at run time once defined');
  t.equal(defineErrorCodes('notes', mine), mine, 'defining the same entries again changes nothing');
  t.throws(
    () => defineErrorCodes('notes', { project_name_taken: { status: 400, type: 'invalid_request_error', message: 'another meaning' } }),
    /project_name_taken of notes is already catalogued by projects/,
  );
  t.throws(() => defineErrorCodes('other', { note_refused: { status: 409, type: 'conflict_error', message: 'The note was refused' } }), /already catalogued by notes/);
});
