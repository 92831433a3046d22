import { readdirSync, statSync } from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { type BuildDecisionError, decideBuild, SourceTree, SUPPORTED } from '../../../../plugins/apps/build-decision/index.ts';
import type { DecideOptions } from '../../../../plugins/apps/build-decision/decide.ts';
import { AVAILABLE, FIXTURES, fixture, scratchRepository } from './fixtures.ts';

/**
 * Each refusal of the deploy rules: a 400 with its code, `param` and the fields a client offers as
 * choices, decided from the repository alone, which is only read.
 */
async function refusal(name: string, options: DecideOptions = {}): Promise<BuildDecisionError> {
  const result = await decideBuild(await fixture(name), { available: AVAILABLE, ...options });
  if (result.ok) throw new Error(`${name} was decided, not refused`);
  return result.error;
}

t.test('several apps and no rootDir: multiple_apps_require_root_dir with the candidate folders', async (t) => {
  const error = await refusal('monorepo-two-apps');
  t.same([error.status, error.code, error.param], [400, 'multiple_apps_require_root_dir', 'rootDir']);
  t.same(error.toEnvelope().error, {
    message: 'The top of the repository is no app, and 2 folders are: choose one with rootDir (apps/api, apps/web)',
    type: 'invalid_request_error',
    code: 'multiple_apps_require_root_dir',
    param: 'rootDir',
    candidates: ['apps/api', 'apps/web'],
  });
});

t.test('nothing buildable: nothing_buildable with what is supported and the files at the top', async (t) => {
  const error = await refusal('nothing-buildable');
  t.same([error.status, error.code, error.param], [400, 'nothing_buildable', null]);
  const envelope = error.toEnvelope().error as Record<string, unknown>;
  t.same(envelope['topLevelFiles'], ['README.md', 'notes.txt', 'scripts/']);
  t.same(envelope['supported'], [
    { provider: 'node', files: ['package.json'] },
    { provider: 'python', files: ['requirements.txt', 'pyproject.toml', 'Pipfile'] },
    { provider: 'go', files: ['go.mod'] },
    { provider: 'static', files: ['index.html'] },
  ]);
  t.same(envelope['supported'], SUPPORTED);
  t.match(error.message, /looks for node \(package\.json\), python \(requirements\.txt, pyproject\.toml, Pipfile\), go \(go\.mod\), static \(index\.html\)/);
});

t.test('a rootDir that builds nothing: nothing_buildable naming rootDir, listing that folder', async (t) => {
  const error = await refusal('monorepo-two-apps', { rootDir: 'docs' });
  t.same([error.code, error.param], ['nothing_buildable', 'rootDir']);
  t.same((error.toEnvelope().error as Record<string, unknown>)['topLevelFiles'], ['README.md']);
  t.match(error.message, /^The folder docs holds no app/);
});

for (const rootDir of ['../other', 'apps/../../etc', '/etc', 'C:\\apps']) {
  t.test(`rootDir ${JSON.stringify(rootDir)} leaves the repository: root_dir_not_found`, async (t) => {
    const error = await refusal('monorepo-two-apps', { rootDir });
    t.same([error.status, error.code, error.param], [400, 'root_dir_not_found', 'rootDir']);
    t.match(error.message, /relative to its top, without "\.\."/);
  });
}

t.test('a rootDir naming no folder (or a file): root_dir_not_found', async (t) => {
  for (const rootDir of ['apps/wbe', 'README.md']) {
    const error = await refusal('monorepo-two-apps', { rootDir });
    t.same([error.code, error.param], ['root_dir_not_found', 'rootDir'], rootDir);
    t.match(error.message, /names no folder of the repository/);
  }
});

t.test('lockfiles of two package managers: multiple_lockfiles naming them', async (t) => {
  const error = await refusal('node-two-lockfiles');
  t.same([error.status, error.code, error.param], [400, 'multiple_lockfiles', null]);
  t.same((error.toEnvelope().error as Record<string, unknown>)['lockfiles'], ['package-lock.json', 'yarn.lock']);
  t.match(error.message, /delete the ones you do not use/);
});

t.test('a runtime this machine does not have: runtime_unavailable naming it', async (t) => {
  const error = await refusal('go-http', { available: ['node', 'python'] });
  t.same([error.status, error.code, error.param], [400, 'runtime_unavailable', null]);
  t.same((error.toEnvelope().error as Record<string, unknown>)['runtime'], 'go');
  const bun = await refusal('node-bun');
  t.same([bun.code, (bun.toEnvelope().error as Record<string, unknown>)['runtime']], ['runtime_unavailable', 'bun']);
});

t.test('a static site needs no runtime at all', async (t) => {
  const result = await decideBuild(await fixture('static-site'), { available: [] });
  t.ok(result.ok);
});

t.test('no start to be read: no_start_command naming startCommand, with what to add', async (t) => {
  const node = await refusal('node-no-start');
  t.same([node.status, node.code, node.param], [400, 'no_start_command', 'startCommand']);
  t.match(node.message, /add a start script, or give startCommand/);
  const python = await refusal('python-no-entry');
  t.same([python.code, python.param], ['no_start_command', 'startCommand']);
  t.match(python.message, /add a Procfile with a web: line, or give startCommand/);
});

t.test('an unfinished startCommand: unfinished_start_command naming startCommand', async (t) => {
  const error = await refusal('node-express', { overrides: { startCommand: 'node' } });
  t.same([error.status, error.code, error.param], [400, 'unfinished_start_command', 'startCommand']);
  t.equal(error.message, 'startCommand runs "node" alone, which starts no app: name the file to run, like "node server.js"');
});

t.test('an unfinished Procfile web line is refused too, saying startCommand would replace it', async (t) => {
  const scratch = scratchRepository(t, { 'requirements.txt': 'flask\n', Procfile: 'web: gunicorn "app:app\n' });
  const error = await decideBuild(await SourceTree.open(scratch), { available: AVAILABLE });
  t.notOk(error.ok);
  if (!error.ok) {
    t.same([error.error.code, error.error.param], ['unfinished_start_command', 'startCommand']);
    t.match(error.error.message, /^The Procfile's web command has an unclosed quote.*or give startCommand/);
  }
});

t.test('a buildCommand or installCommand of several lines is refused as invalid_parameter naming it', async (t) => {
  for (const field of ['buildCommand', 'installCommand'] as const) {
    const error = await refusal('node-express', { overrides: { [field]: 'npm ci\nnpm run build' } });
    t.same([error.status, error.code, error.param], [400, 'invalid_parameter', field]);
  }
});

t.test('a startCommand for a static site is refused: it runs no command', async (t) => {
  const error = await refusal('static-site', { overrides: { startCommand: 'python -m http.server' } });
  t.same([error.code, error.param], ['invalid_parameter', 'startCommand']);
});

t.test('deciding only reads: every fixture is unchanged after every refusal and decision', async (t) => {
  const snapshot = () => listing(FIXTURES);
  const before = snapshot();
  for (const name of readdirSync(FIXTURES)) {
    await decideBuild(await fixture(name), { available: AVAILABLE });
    await decideBuild(await fixture(name), { available: AVAILABLE, rootDir: 'nope', overrides: { startCommand: 'node' } });
  }
  t.same(snapshot(), before);
});

function listing(folder: string): string[] {
  return readdirSync(folder, { recursive: true, encoding: 'utf8' })
    .sort()
    .map((name) => {
      const info = statSync(path.join(folder, name));
      return `${name} ${info.size} ${info.mtimeMs}`;
    });
}
