import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import t from 'tap';
import { decideBuild, SourceTree } from '../../../../plugins/apps/build-decision/index.ts';
import { findCandidates } from '../../../../plugins/apps/build-decision/root-dir.ts';
import { DETECTORS } from '../../../../plugins/apps/build-decision/decide.ts';
import { PathOutsideTree } from '../../../../plugins/apps/build-decision/source-tree.ts';
import { AVAILABLE, scratchRepository } from './fixtures.ts';

/** The read-only view of a checkout: nothing outside the root can be reached, nothing large read whole. */

function outside(t: Parameters<typeof scratchRepository>[0]): string {
  const folder = mkdtempSync(path.join(tmpdir(), 'outside-'));
  t.teardown(() => rmSync(folder, { recursive: true, force: true }));
  writeFileSync(path.join(folder, 'secret.json'), '{"scripts":{"start":"node stolen.js"}}');
  mkdirSync(path.join(folder, 'dir'));
  return folder;
}

t.test('a symlink leaving the root reads as absent, for files and folders', async (t) => {
  const elsewhere = outside(t);
  const root = scratchRepository(t, { 'inside.txt': 'ok' });
  symlinkSync(path.join(elsewhere, 'secret.json'), path.join(root, 'package.json'));
  symlinkSync(elsewhere, path.join(root, 'linked'));
  symlinkSync('inside.txt', path.join(root, 'alias.txt'));
  const tree = await SourceTree.open(root);
  t.same(await tree.read('package.json'), { kind: 'absent' });
  t.equal(await tree.exists('linked'), false);
  t.same(await tree.list('linked'), []);
  t.same(
    await tree.list(),
    [
      { name: 'alias.txt', kind: 'file' },
      { name: 'inside.txt', kind: 'file' },
    ],
    'the links out are not listed; a link inside is',
  );
  t.equal(await tree.readText('alias.txt'), 'ok');
  const decided = await decideBuild(tree, { available: AVAILABLE });
  t.same(decided.ok ? null : decided.error.code, 'nothing_buildable', 'a package.json linked from outside makes no app');
});

t.test('paths with .. or absolute are refused outright', async (t) => {
  const tree = await SourceTree.open(scratchRepository(t, { 'a/b.txt': 'x' }));
  for (const bad of ['../x', 'a/../../x', '/etc/passwd']) {
    await t.rejects(tree.read(bad), PathOutsideTree, bad);
    t.throws(() => tree.subtree(bad), PathOutsideTree, bad);
  }
  t.equal(await tree.readText('./a//b.txt'), 'x', 'redundant segments are fine');
});

t.test('a file over the size cap is not read', async (t) => {
  const root = scratchRepository(t, { 'big.json': 'x'.repeat(2048), 'small.json': '{}' });
  const tree = await SourceTree.open(root, { maxEntries: 100, maxFileBytes: 1024 });
  t.same(await tree.read('big.json'), { kind: 'too_large', bytes: 2048 });
  t.equal(await tree.readText('small.json'), '{}');
});

t.test('a listing is capped at maxEntries, by name', async (t) => {
  const tree = await SourceTree.open(scratchRepository(t, { c: '', a: '', b: '' }), { maxEntries: 2, maxFileBytes: 1024 });
  t.same(
    (await tree.list()).map((entry) => entry.name),
    ['a', 'b'],
  );
});

t.test('a subtree reads relative to its folder and still cannot climb out', async (t) => {
  const tree = await SourceTree.open(scratchRepository(t, { 'apps/web/package.json': '{}', 'top.txt': 'top' }));
  const web = tree.subtree('apps/web');
  t.equal(web.rootDir, 'apps/web');
  t.equal(await web.readText('package.json'), '{}');
  await t.rejects(web.read('../../top.txt'), PathOutsideTree);
});

t.test('candidate folders: up to three levels down, not inside a found app, skipping dependencies and output', async (t) => {
  const root = scratchRepository(t, {
    'apps/web/package.json': '{}',
    'apps/web/public/index.html': '',
    'services/api/go/go.mod': 'module x\n',
    'too/deep/down/here/go.mod': 'module y\n',
    'node_modules/left-pad/package.json': '{}',
    'vendor/lib/go.mod': 'module z\n',
    'dist/index.html': '',
    '.github/actions/x/package.json': '{}',
  });
  t.same(await findCandidates(await SourceTree.open(root), DETECTORS), ['apps/web', 'services/api/go']);
});
