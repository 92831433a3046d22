import t from 'tap';
import { missingEnv, SERVICE_SET_ENV, serviceProvidedEnv, SourceTree } from '../../../../plugins/apps/build-decision/index.ts';
import { parseEnvNames, readEnvKeys } from '../../../../plugins/apps/build-decision/env-keys.ts';
import { scratchRepository } from './fixtures.ts';

/** envKeys: the names an app's example env file asks for; missingEnv: those nothing sets. */

t.test('dotenv syntax: comments, export, quoted values; names only, each once', async (t) => {
  const text = [
    '# a comment',
    '',
    'PLAIN=value # trailing comment',
    'export EXPORTED=1',
    '  INDENTED = spaced',
    'EMPTY=',
    "SINGLE='it''s'",
    'DOUBLE="a \\" quote"',
    'not an assignment',
    'PLAIN=again',
  ].join('\n');
  t.same(parseEnvNames(text), ['PLAIN', 'EXPORTED', 'INDENTED', 'EMPTY', 'SINGLE', 'DOUBLE']);
});

t.test('the lines of a quoted value that spans lines are value, not names', async (t) => {
  const text = 'KEY="-----BEGIN-----\nFAKE=inside\n-----END-----"\nAFTER=1\nBACKTICK=`one\nTWO=2`\nLAST=x\n';
  t.same(parseEnvNames(text), ['KEY', 'AFTER', 'BACKTICK', 'LAST']);
});

t.test('a quote never closed reads as that line only, as dotenv does', async (t) => {
  t.same(parseEnvNames('OPEN="no end\nNEXT=1\n'), ['OPEN', 'NEXT']);
});

t.test('CRLF files read the same', async (t) => {
  t.same(parseEnvNames('A=1\r\nexport B="2"\r\n# C=3\r\n'), ['A', 'B']);
});

t.test('the first of .env.example, .env.sample, .env.template is read', async (t) => {
  const both = await SourceTree.open(scratchRepository(t, { '.env.sample': 'FROM_SAMPLE=1\n', '.env.template': 'FROM_TEMPLATE=1\n' }));
  t.same(await readEnvKeys(both), { keys: ['FROM_SAMPLE'], file: '.env.sample' });
  const all = await SourceTree.open(scratchRepository(t, { '.env.example': 'FROM_EXAMPLE=1\n', '.env.sample': 'FROM_SAMPLE=1\n' }));
  t.same(await readEnvKeys(all), { keys: ['FROM_EXAMPLE'], file: '.env.example' });
});

t.test('no example file: [] and no file', async (t) => {
  const none = await SourceTree.open(scratchRepository(t, { '.env': 'SECRET=1\n', 'package.json': '{}' }));
  t.same(await readEnvKeys(none), { keys: [], file: null }, 'a committed .env is not an example');
});

t.test('missingEnv: the keys set neither by the caller, the stored env nor the service, in envKeys order', async (t) => {
  const envKeys = ['DATABASE_URL', 'PORT', 'STRIPE_KEY', 'SVC_API_KEY', 'MAIL_HOST', 'SESSION_SECRET'];
  t.same(missingEnv(envKeys, { caller: ['STRIPE_KEY'], stored: new Set(['MAIL_HOST']), serviceProvided: serviceProvidedEnv({ databaseProvided: false }) }), [
    'DATABASE_URL',
    'SESSION_SECRET',
  ]);
  t.same(missingEnv(envKeys, { serviceProvided: serviceProvidedEnv({ databaseProvided: true }) }), ['STRIPE_KEY', 'MAIL_HOST', 'SESSION_SECRET'], 'a provided database sets DATABASE_URL');
});

t.test('missingEnv: [] without an example file, null before a deploy recorded envKeys', async (t) => {
  t.same(missingEnv([], { caller: ['X'] }), []);
  t.equal(missingEnv(null, { caller: ['X'] }), null);
});

t.test('the service always sets PORT and the managed variables', async (t) => {
  t.same([...SERVICE_SET_ENV], ['PORT', 'SVC_API_KEY', 'SVC_BASE_URL', 'SVC_MCP_URL']);
});
