import t from 'tap';
import { ConfigError } from '../../../config/load.ts';
import { gitIsAvailable } from '../../../plugins/githost/git-process.ts';
import { buildTestApp } from '../../helpers/app.ts';

t.test('with git on PATH the plugin starts', async (t) => {
  t.ok(gitIsAvailable(), 'this machine has git');
  const test = await buildTestApp(t, { plugins: { githost: {} } });
  t.equal((await test.call('GET', '/client/githost/status')).statusCode, 200);
});

t.test('without git on PATH the boot stops, naming the Debian package to install', async (t) => {
  const test = await buildTestApp(t, { plugins: { githost: {} }, ready: false });
  const path = process.env.PATH;
  process.env.PATH = '/nonexistent';
  t.teardown(() => {
    process.env.PATH = path;
  });
  t.notOk(gitIsAvailable());
  const error = await test.app.ready().then(
    () => null,
    (caught: Error) => caught,
  );
  process.env.PATH = path;
  t.ok(error instanceof ConfigError, 'a configuration error: main prints its one line and exits');
  t.match(error?.message, /^config: plugins\.githost: git is not installed .*install the Debian package 'git'/);
});
