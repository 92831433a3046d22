import { readFile } from 'node:fs/promises';
import t from 'tap';
import { managementOpenApi, SCHEMA_FILE, schemaTypes } from '../../../tools/console-build.ts';

/**
 * console/api/schema.d.ts is committed so `tsc` checks the console against the API; this fails
 * when the API changed and the copy was not regenerated (`npm run build:console` writes it).
 */
t.test('the console’s committed API types equal those generated from the service’s OpenAPI document', async (t) => {
  const generated = await schemaTypes(await managementOpenApi());
  const committed = await readFile(SCHEMA_FILE, 'utf8');
  t.ok(committed === generated, 'console/api/schema.d.ts is current (regenerate with npm run build:console)');
});
