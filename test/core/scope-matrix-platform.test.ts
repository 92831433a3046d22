import t from 'tap';
import { MANAGEMENT_PREFIXES } from '../../core/http/mount-operations.ts';
import { mountMatrix, scopeMatrixApp } from '../helpers/scope-matrix-app.ts';

// The scope matrix (test/helpers/scope-matrix-app.ts): the /platform/v1 mount, and the management index on both.
const matrix = await scopeMatrixApp(t);
const { test } = matrix;

mountMatrix(t, matrix, '/platform/v1');

t.test('the management index answers 401 without a credential on both mounts', async (t) => {
  for (const prefix of MANAGEMENT_PREFIXES) {
    t.equal((await test.call('GET', `${prefix}/`, { token: null })).statusCode, 401, prefix);
  }
});
