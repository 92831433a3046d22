import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { definePlugin } from '../../core/kernel/plugin.ts';
import type { Queryable } from '../../core/ports/database.ts';
import { Tokens } from '../../core/kernel/di-tokens.ts';
import { allPlugins, buildTestApp } from '../helpers/app.ts';

/** What a customer hands over, e.g. an upstream MCP server's header secret. */
const PLAINTEXT = 'cust-Secret-7f3a9c1e-do-not-leak';

/**
 * Stores the value it is given and then logs the way hurried code does: the SecretValue itself,
 * the raw value under names that should be redacted, and an error message built from the value.
 */
const secretsFixture = definePlugin({
  name: 'fixture-secrets',
  description: 'Test fixture: stores a customer secret and logs carelessly around it',
  routes(app, ctx) {
    const vault = ctx.container.resolve(Tokens.Secrets);
    app.post('/client/fixture/secrets', { config: { auth: { scope: null } } }, async (request) => {
      const { value } = request.body as { value: string };
      const owner = { kind: 'mcp-upstream', id: 'up_fixture' };
      await vault.put(owner, 'header_secret', value);
      const stored = (await vault.get(owner, 'header_secret'))!;
      request.log.info({ owner, secret: stored.value, stored }, `stored ${stored.value}`);
      request.log.warn({ password: value, upstream: { apiKey: value, clientSecret: value, token: value, authorization: `Bearer ${value}` } }, 'upstream answered 401');
      throw new Error(`upstream refused the credential ${stored.value}`);
    });
  },
});

const dir = mkdtempSync(join(tmpdir(), 'svc-secrets-at-rest-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));
const manifest = [secretsFixture];

function capture() {
  const lines: string[] = [];
  return { lines, logStream: { write: (line: string) => void lines.push(line) } };
}

/** Every text-like and bytea column of every table in the schema that holds `needle`. */
async function columnsHolding(db: Queryable, needle: string): Promise<string[]> {
  const { rows: columns } = await db.query<{ table_name: string; column_name: string; data_type: string }>(
    `SELECT c.table_name, c.column_name, c.data_type FROM information_schema.columns c
       JOIN information_schema.tables tb ON tb.table_schema = c.table_schema AND tb.table_name = c.table_name AND tb.table_type = 'BASE TABLE'
     WHERE c.table_schema = current_schema()
       AND c.data_type IN ('text', 'character varying', 'character', 'json', 'jsonb', 'bytea', 'ARRAY', 'USER-DEFINED')`,
  );
  const found: string[] = [];
  for (const column of columns) {
    const ident = `"${column.column_name}"`;
    const where = column.data_type === 'bytea' ? `position(convert_to($1, 'UTF8') in ${ident}) > 0` : `${ident}::text LIKE '%' || $1 || '%'`;
    const { rows } = await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM "${column.table_name}" WHERE ${where}`, [needle]);
    if (rows[0]!.n > 0) found.push(`${column.table_name}.${column.column_name}`);
  }
  return found;
}

t.test('a customer secret reaches neither the process log nor any database column in clear', async (t) => {
  const log = capture();
  const test = await buildTestApp(t, { manifest, plugins: allPlugins(manifest), config: { server: { logLevel: 'trace' } }, logStream: log.logStream });
  const response = await test.call('POST', '/client/fixture/secrets', { body: { value: PLAINTEXT } });
  t.equal(response.statusCode, 500);
  t.notMatch(response.body, PLAINTEXT);

  const written = log.lines.join('');
  t.match(written, /\[secret\]/, 'the SecretValue was logged, as [secret]');
  t.match(written, /\[redacted\]/, 'the raw value under secret-looking names was redacted');
  t.match(written, /upstream refused the credential \[secret\]/, 'an error message built from the value says [secret]');
  t.notOk(written.includes(PLAINTEXT), 'no log line holds the plaintext');

  const db = test.app.svc.container.resolve(Tokens.Database);
  t.same(await columnsHolding(db, PLAINTEXT), [], 'no column holds the plaintext');
  const { rows } = await db.query<{ n: number }>('SELECT count(*)::int AS n FROM secrets');
  t.equal(rows[0]!.n, 1, 'the secret is stored, encrypted');

  // The scan would have found it: a mail's body (unlike its `secrets`) sits in clear in the outbox.
  await test.app.svc.container.resolve(Tokens.Mailer).send({ to: 'ops@example.com', subject: 'code', text: `your code ${PLAINTEXT}` });
  t.same(await columnsHolding(db, PLAINTEXT), ['mail_outbox.text_body'], 'the scan finds a plaintext where there is one');
});

t.test('the start that creates the key file says so once, without the key', async (t) => {
  const keyFile = join(dir, 'secret-keys');
  const first = capture();
  await buildTestApp(t, { plugins: {}, config: { server: { logLevel: 'info' }, secrets: { keyFile } }, logStream: first.logStream });
  const created = first.lines.filter((line) => line.includes('created the key file'));
  t.equal(created.length, 1);
  t.match(created[0], keyFile);
  const key = readFileSync(keyFile, 'utf8').trim().split('\n').pop()!.split(':')[1]!;
  t.notOk(first.lines.join('').includes(key), 'the key is never logged');

  const second = capture();
  await buildTestApp(t, { plugins: {}, config: { server: { logLevel: 'info' }, secrets: { keyFile } }, logStream: second.logStream });
  t.same(
    second.lines.filter((line) => line.includes('key file')),
    [],
    'a later start is silent about it',
  );
});
