import t from 'tap';
import { formTargetOf } from '../../../plugins/oauth/consent-routes.ts';

/** The consent page's CSP lets its form end at the client's redirect: an origin, or a native app's own scheme. */

t.test('a web client is reached at its redirect origin', async (t) => {
  t.equal(formTargetOf('https://client.example/callback?x=1'), 'https://client.example');
  t.equal(formTargetOf('http://127.0.0.1:33418/callback'), 'http://127.0.0.1:33418');
});

t.test('a native app is reached at its own scheme, since such a URL has no origin', async (t) => {
  t.equal(formTargetOf('cursor://anysphere.cursor-retrieval/oauth/callback'), 'cursor:');
  t.equal(formTargetOf('com.example.app:/oauth2redirect'), 'com.example.app:');
});
