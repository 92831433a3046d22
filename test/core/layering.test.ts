import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import t from 'tap';

/**
 * The layers, checked on the source rather than trusted to review: core/ knows only its ports,
 * composition/ chooses the adapters behind them, plugins and providers build on core/ and write
 * their SQL with adapters/sql/'s helpers, and config/ is read by everyone and reads no one.
 */
const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');

interface Rule {
  /** The layer whose files are checked. */
  from: string;
  /** Why the edge is wrong, for the failure message. */
  because: string;
  forbids(target: string): boolean;
}

const under = (folder: string) => (target: string) => target === folder || target.startsWith(`${folder}/`);

const RULES: Rule[] = [
  ...['adapters', 'composition', 'plugins', 'providers'].map((layer) => ({
    from: 'core',
    because: `the kernel knows only its ports (core/ports/); ${layer}/ builds on it, not the other way round`,
    forbids: under(layer),
  })),
  ...['plugins', 'providers'].flatMap((from) => [
    { from, because: 'composition/ chooses adapters for the whole process; a plugin or provider is given what it needs', forbids: under('composition') },
    {
      from,
      because: 'drivers are composition/ choices; only the SQL helpers in adapters/sql/ are shared with plugins',
      forbids: (target: string) => under('adapters')(target) && !under('adapters/sql')(target),
    },
  ]),
  ...['adapters', 'composition', 'core', 'plugins', 'providers'].map((layer) => ({
    from: 'config',
    because: `config/ is the bottom layer: every other one reads it, it reads none of them (here ${layer}/)`,
    forbids: under(layer),
  })),
];

function sourcesUnder(folder: string): string[] {
  return readdirSync(join(ROOT, folder), { recursive: true, encoding: 'utf8' })
    .filter((name) => name.endsWith('.ts'))
    .map((name) => join(folder, name).split('\\').join('/'));
}

/** Static, re-exported, side-effect, dynamic and type-position (`import('…').T`) specifiers. */
const SPECIFIER_PATTERNS = [/\b(?:import|export)\s[^'"`;]*?\bfrom\s*['"]([^'"]+)['"]/g, /\bimport\s*['"]([^'"]+)['"]/g, /\bimport\s*\(\s*['"]([^'"]+)['"]\s*\)/g];

function importsOf(file: string): string[] {
  const text = readFileSync(join(ROOT, file), 'utf8');
  return SPECIFIER_PATTERNS.flatMap((pattern) => [...text.matchAll(pattern)].map((match) => match[1]!));
}

/** The repository path a relative specifier points at; packages (`fastify`, `node:fs`) are no layer. */
function targetOf(file: string, specifier: string): string | null {
  if (!specifier.startsWith('.')) return null;
  return relative(ROOT, resolve(ROOT, dirname(file), specifier))
    .split('\\')
    .join('/');
}

const edges = ['core', 'plugins', 'providers', 'config'].flatMap((folder) =>
  sourcesUnder(folder).flatMap((file) =>
    importsOf(file).flatMap((specifier) => {
      const target = targetOf(file, specifier);
      return target === null ? [] : [{ file, specifier, target }];
    }),
  ),
);

t.test('the scan sees the imports it is meant to judge', async (t) => {
  const seen = (file: string, target: string) => edges.some((edge) => edge.file === file && edge.target === target);
  t.ok(seen('core/kernel/app.ts', 'core/ports/kernel-adapters.ts'), 'a static import');
  t.ok(seen('plugins/metering/index.ts', 'core/kernel/plugin.ts'), 'a plugin on the kernel');
  t.ok(edges.length > 300, `${edges.length} relative imports found`);
});

for (const layer of ['core', 'plugins', 'providers', 'config']) {
  t.test(`${layer}/ imports only what its layer may`, async (t) => {
    const wrong = edges.flatMap(({ file, specifier, target }) => {
      if (!under(layer)(file)) return [];
      const rule = RULES.find((candidate) => candidate.from === layer && candidate.forbids(target));
      return rule ? [`${file} imports '${specifier}': ${rule.because}`] : [];
    });
    t.same(wrong, [], wrong.join('\n'));
  });
}

t.test('core/ writes no table of its own: tables belong to the adapters (kernel stores) and to the plugins that own them', async (t) => {
  const STATEMENTS = /\b(?:INSERT\s+INTO|DELETE\s+FROM|CREATE\s+TABLE|ALTER\s+TABLE|UPDATE\s+[a-z_]+\s+SET)\b/i;
  const wrong = sourcesUnder('core').filter((file) => STATEMENTS.test(readFileSync(join(ROOT, file), 'utf8')));
  t.same(wrong, [], `SQL that writes tables in ${wrong.join(', ')}: move it to adapters/sql/ (kernel stores) or to its plugin`);
});
