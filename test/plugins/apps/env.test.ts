import t from 'tap';
import { Tokens } from '../../../core/kernel/di-tokens.ts';
import { addPerson, buildTestApp, createKey, type TestApp } from '../../helpers/app.ts';
import { storedApp } from './apps-fixtures.ts';

/**
 * The env routes on stored records (nothing built or running: every change applies at the next
 * deploy): the environment view and who sees values, reserved names and values an environment cannot
 * carry (400 with param, nothing written), the no-op, the optimistic version (racing changes: one 200,
 * one 409 with nothing written) and removal. Restarts of a running app: env-restarts.test.ts.
 */
t.test('service env', async (t) => {
  const test = await buildTestApp(t, { plugins: { keys: {}, projects: {}, githost: {}, apps: { proxy: { port: 0 } } } });
  const { serviceId } = await storedApp(test, 'envy');
  const env = (token?: string, query = '') => test.call('GET', `/client/services/${serviceId}/env${query}`, { token });
  const change = (body: unknown) => test.call('POST', `/client/services/${serviceId}/env`, { body });

  await t.test('a service with no variables: version 0, the managed variables always present and read-only', async (t) => {
    const response = await env();
    t.equal(response.statusCode, 200, response.body);
    const view = response.json();
    t.match(view, { object: 'service_env', serviceId, version: 0, canReveal: true, vars: [] });
    t.same(
      view.managed.map((entry: { name: string }) => entry.name),
      ['SVC_API_KEY', 'SVC_BASE_URL', 'SVC_MCP_URL'],
    );
    t.match(view.managed[1], { value: 'http://127.0.0.1:8080/v1' });
    t.match(view.managed[2], { value: 'http://127.0.0.1:8080/mcp/gateway' });
  });

  await t.test('set variables: 200, stored, no restart while nothing is live (the deploy takes them)', async (t) => {
    const response = await change({ vars: { GREETING: 'hola-5e1f9', TOKEN: 's3cret' } });
    t.equal(response.statusCode, 200, response.body);
    t.match(response.json(), { object: 'service_env_change', version: 1, set: ['GREETING', 'TOKEN'], removed: [], restart: 'next_deploy' });
    t.match((await env()).json(), {
      version: 1,
      vars: [
        { name: 'GREETING', value: 'hola-5e1f9' },
        { name: 'TOKEN', value: 's3cret' },
      ],
    });
  });

  await t.test('reveal=0 answers names only', async (t) => {
    const view = (await env(undefined, '?reveal=0')).json();
    t.match(view, { canReveal: true });
    t.same(
      view.vars.map((entry: { value: string | null }) => entry.value),
      [null, null],
    );
  });

  await t.test('the same values again are a no-op: no new version, no restart', async (t) => {
    const response = await change({ vars: { GREETING: 'hola-5e1f9' }, remove: ['NOT_SET'] });
    t.equal(response.statusCode, 200, response.body);
    t.match(response.json(), { version: 1, set: [], removed: [], restart: 'none' });
  });

  await t.test('reserved names are 400 reserved_env_name naming the variable, and nothing is written', async (t) => {
    for (const [body, param] of [
      [{ vars: { PORT: '80' } }, 'vars.PORT'],
      [{ vars: { OK: 'x', SVC_API_KEY: 'mine' } }, 'vars.SVC_API_KEY'],
      [{ vars: { SVC_ANYTHING: 'x' } }, 'vars.SVC_ANYTHING'],
      [{ remove: ['GREETING', 'PORT'] }, 'remove.1'],
    ] as const) {
      const response = await change(body);
      t.equal(response.statusCode, 400, response.body);
      t.match(response.json().error, { code: 'reserved_env_name', param, type: 'invalid_request_error' });
    }
    const deleted = await test.call('DELETE', `/client/services/${serviceId}/env/SVC_BASE_URL`);
    t.equal(deleted.statusCode, 400);
    t.match(deleted.json().error, { code: 'reserved_env_name', param: 'name' });
    t.match((await env()).json(), { version: 1, vars: [{ name: 'GREETING' }, { name: 'TOKEN' }] });
  });

  await t.test('a deploy’s env is held to the same names: 400 reserved_env_name with param, nothing created', async (t) => {
    for (const name of ['PORT', 'SVC_API_KEY']) {
      const response = await test.call('POST', '/client/apps/githost', { body: { repo: 'anything', env: { OK: '1', [name]: 'x' } } });
      t.equal(response.statusCode, 400, response.body);
      t.match(response.json().error, { code: 'reserved_env_name', param: `env.${name}` });
    }
    t.equal((await test.call('GET', '/client/apps')).json().data.length, 1, 'only the stored app');
  });

  await t.test('a value an environment cannot carry is 400 with param, nothing written: a lone surrogate, a NUL byte', async (t) => {
    const surrogate = await change({ vars: { FINE: 'yes', BAD: 'x\ud800' } });
    t.equal(surrogate.statusCode, 400, surrogate.body);
    t.match(surrogate.json().error, { code: 'invalid_env_value', param: 'vars.BAD' });
    // The kernel refuses a NUL in any input before the route sees it.
    const nul = await change({ vars: { FINE: 'yes', BAD: 'a\u0000b' } });
    t.equal(nul.statusCode, 400, nul.body);
    t.match(nul.json().error, { code: 'invalid_parameter', param: 'vars.BAD' });
    t.equal((await env()).json().version, 1, 'nothing written');
  });

  await t.test('neither vars nor remove, an unknown field, a bad name: 400', async (t) => {
    for (const body of [{}, { vars: {}, extra: 1 }, { vars: { '1BAD': 'x' } }]) {
      t.equal((await change(body)).statusCode, 400, JSON.stringify(body));
    }
  });

  await t.test('two changes sent with the same version at once: one 200, one 409 env_conflict with nothing written', async (t) => {
    const { version } = (await env()).json();
    const answers = await Promise.all([change({ vars: { RACE: 'a' }, version }), change({ vars: { RACE: 'b', ONLY_B: 'b' }, version })]);
    t.same(answers.map((answer) => answer.statusCode).sort(), [200, 409]);
    const lost = answers.find((answer) => answer.statusCode === 409)!;
    t.match(lost.json().error, { code: 'env_conflict', type: 'conflict_error', param: 'version' });
    const view = (await env()).json();
    t.equal(view.version, version + 1, 'one write');
    const winner = answers[0]!.statusCode === 200 ? 'a' : 'b';
    t.match(
      view.vars.find((entry: { name: string }) => entry.name === 'RACE'),
      { value: winner },
    );
    t.equal(
      view.vars.some((entry: { name: string }) => entry.name === 'ONLY_B'),
      winner === 'b',
      'the losing change wrote nothing',
    );
  });

  await t.test('a change sent with a version another change passed is 409', async (t) => {
    const response = await change({ vars: { LATE: 'x' }, version: 0 });
    t.equal(response.statusCode, 409);
    t.match(response.json().error, { code: 'env_conflict' });
  });

  await t.test('DELETE removes one variable; an unknown name is 404 env_var_not_found', async (t) => {
    const removed = await test.call('DELETE', `/client/services/${serviceId}/env/TOKEN`);
    t.equal(removed.statusCode, 200, removed.body);
    t.match(removed.json(), { removed: ['TOKEN'], set: [] });
    t.notOk(
      (await env()).json().vars.some((entry: { name: string }) => entry.name === 'TOKEN'),
      'gone',
    );
    const unknown = await test.call('DELETE', `/client/services/${serviceId}/env/TOKEN`);
    t.equal(unknown.statusCode, 404);
    t.match(unknown.json().error, { code: 'env_var_not_found', param: 'name' });
    const stale = await test.call('DELETE', `/client/services/${serviceId}/env/GREETING?version=0`);
    t.equal(stale.statusCode, 409, 'a stale version');
  });

  await t.test('values are shown to who may change them; a viewer and a key without apps:deploy see names only', async (t) => {
    const developer = await projectPerson(test, 'developer');
    const viewer = await projectPerson(test, 'viewer');
    t.match((await env(developer)).json(), { canReveal: true, vars: [{ name: 'GREETING', value: 'hola-5e1f9' }] });
    for (const token of [viewer, (await createKey(test, { scopes: ['apps:read'] })).key, (await createKey(test, { scopes: ['inference'] })).key]) {
      const response = await env(token);
      t.equal(response.statusCode, 200, response.body);
      t.match(response.json(), { canReveal: false, vars: [{ name: 'GREETING', value: null }] });
    }
    const refused = await test.call('POST', `/client/services/${serviceId}/env`, { token: viewer, body: { vars: { X: 'z' } } });
    t.equal(refused.statusCode, 403, 'a viewer cannot change them');
  });

  await t.test('no value is written to any table: only the vault’s sealed row holds them', async (t) => {
    const database = test.app.svc.container.resolve(Tokens.Database);
    const tables = await database.query<{ table_name: string }>("SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() AND table_type = 'BASE TABLE'");
    for (const { table_name } of tables.rows) {
      const { rows } = await database.query(`SELECT count(*)::int AS n FROM ${JSON.stringify(table_name)} t WHERE t::text LIKE '%hola-5e1f9%'`);
      t.equal((rows[0] as { n: number }).n, 0, `${table_name} holds no value`);
    }
  });
});

/** A member of the organisation with this role on the default project; their session token. */
async function projectPerson(test: TestApp, role: 'developer' | 'viewer'): Promise<string> {
  const person = await addPerson(test, { role: 'member' });
  await test.app.svc.container.resolve(Tokens.Identity).projectMembers.upsert({ projectId: test.defaultProjectId, personId: person.personId, role });
  return person.token;
}
