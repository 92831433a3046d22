import { type Detection, type Detector, chosen } from './detection.ts';
import type { SourceTree } from './source-tree.ts';
import type { Chosen } from './types.ts';

/**
 * Go apps: go.mod. The build compiles the main package (at the module's top, else the one folder
 * under cmd/) into `./app`, which the start runs.
 */
const FRAMEWORKS: ReadonlyArray<readonly [string, string]> = [
  ['github.com/gin-gonic/gin', 'gin'],
  ['github.com/labstack/echo', 'echo'],
  ['github.com/gofiber/fiber', 'fiber'],
  ['github.com/go-chi/chi', 'chi'],
  ['github.com/gorilla/mux', 'gorilla'],
];

export const goDetector: Detector = {
  provider: 'go',
  markers: ['go.mod'],
  async detect(tree) {
    if (!(await tree.isFile('go.mod'))) return null;
    const goMod = (await tree.readText('go.mod')) ?? '';
    const version = /^go\s+(\S+)/m.exec(goMod)?.[1];
    const main = await mainPackage(tree);
    const detection: Detection = {
      provider: 'go',
      runtime: { ...chosen('go', 'go_mod', 'go.mod', ...(version ? [`go directive ${version}`] : [])), value: 'go' as const },
      framework: frameworkOf(goMod),
      install: chosen('go mod download', 'go_mod', 'go.mod'),
      build:
        main === null
          ? chosen(null, 'no_main_package', 'no package main at the top of the module, and not exactly one under cmd/')
          : chosen(`go build -o app ${main.path}`, 'go_main_package', `package main in ${main.file}`),
      start: main === null ? null : chosen('./app', 'go_built_binary', `the binary go build made from ${main.path}`),
      scripts: null,
    };
    return main === null
      ? { ...detection, startHint: 'no package main at the top of the module, and not exactly one folder under cmd/ holding one: give startCommand (and buildCommand)' }
      : detection;
  },
};

function frameworkOf(goMod: string): Chosen {
  for (const [module, framework] of FRAMEWORKS) {
    // A module path is followed by a version or a major-version suffix (/v5).
    if (new RegExp(`(^|\\s)${module.replace(/[.]/g, '\\.')}(/v\\d+)?\\s`, 'm').test(goMod)) return chosen(framework, 'dependency', `go.mod requires ${module}`);
  }
  return chosen(null, 'no_known_framework', 'go.mod requires no known framework (net/http, presumably)');
}

/** The folder of the main package to build (`.` or `./cmd/x`), and a file of it. */
async function mainPackage(tree: SourceTree): Promise<{ path: string; file: string } | null> {
  const here = await fileWithPackageMain(tree, '');
  if (here !== null) return { path: '.', file: here };
  const commands = (await tree.list('cmd')).filter((entry) => entry.kind === 'dir');
  const found: Array<{ path: string; file: string }> = [];
  for (const command of commands) {
    const file = await fileWithPackageMain(tree, `cmd/${command.name}`);
    if (file !== null) found.push({ path: `./cmd/${command.name}`, file });
  }
  return found.length === 1 ? found[0]! : null;
}

async function fileWithPackageMain(tree: SourceTree, folder: string): Promise<string | null> {
  for (const entry of await tree.list(folder)) {
    if (entry.kind !== 'file' || !entry.name.endsWith('.go') || entry.name.endsWith('_test.go')) continue;
    const path = folder === '' ? entry.name : `${folder}/${entry.name}`;
    if (/^package\s+main\b/m.test((await tree.readText(path)) ?? '')) return path;
  }
  return null;
}
