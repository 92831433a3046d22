import t from 'tap';
import { allPlugins, buildTestApp } from './helpers/app.ts';

t.test('a fresh service answers whoami for its bootstrap owner', async (t) => {
  const started = Date.now();
  const test = await buildTestApp(t);
  const response = await test.call('GET', '/client/whoami');
  t.equal(response.statusCode, 200);
  t.equal(response.json().credential.role, 'owner');
  t.comment(`built in ${Date.now() - started} ms`);
});

t.test('GET / lists only the surfaces this deployment serves', async (t) => {
  const everything = await buildTestApp(t, { plugins: { ...allPlugins(), oauth: { authUrl: 'https://auth.example.com' } } });
  t.same((await everything.call('GET', '/', { token: null })).json().surfaces, {
    inference: '/v1',
    management: '/client',
    regionalManagement: '/platform/v1',
    mcp: '/mcp',
    connectorMcp: 'https://auth.example.com/mcp',
    console: '/console/',
  });
  const managementOnly = await buildTestApp(t, { plugins: { account: {}, keys: {} } });
  t.same((await managementOnly.call('GET', '/', { token: null })).json().surfaces, { management: '/client', regionalManagement: '/platform/v1', mcp: '/mcp' });
});

t.test('the surfaces GET / lists answer there', async (t) => {
  const test = await buildTestApp(t, { plugins: { ...allPlugins(), oauth: { authUrl: 'https://auth.example.com' } } });
  const { surfaces } = (await test.call('GET', '/', { token: null })).json() as { surfaces: Record<string, string> };
  const mcp = await test.call('POST', surfaces.mcp!, { token: null, body: {} });
  t.equal(mcp.statusCode, 401, '/mcp asks for a credential');
  t.match(mcp.headers['www-authenticate'], /^Bearer/);
  const connector = new URL(surfaces.connectorMcp!);
  const signIn = await test.app.inject({ method: 'POST', url: connector.pathname, headers: { host: connector.host }, payload: {} });
  t.equal(signIn.statusCode, 401, '{auth_url}/mcp asks connectors to sign in');
  // The page, or (no console built in this checkout) a 503 naming the build command: never a 404.
  t.not((await test.call('GET', surfaces.console!, { token: null })).statusCode, 404, '/console/ is served');
  t.match(signIn.headers['www-authenticate'], /resource_metadata="https:\/\/auth\.example\.com\/\.well-known\/oauth-protected-resource\/mcp"/);
});
