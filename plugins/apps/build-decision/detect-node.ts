import { type Detection, type Detector, chosen, firstFile } from './detection.ts';
import type { SourceTree } from './source-tree.ts';
import type { Chosen } from './types.ts';

/**
 * Node apps: package.json. The package manager comes from the `packageManager` field (corepack's
 * statement of intent), else from the one lockfile committed; it names the install command. The
 * `build` script builds; `start` (else `main`, else npm's own default `server.js`) starts.
 */
type Manager = 'npm' | 'pnpm' | 'yarn' | 'bun';

const LOCKFILES: ReadonlyArray<readonly [string, Manager]> = [
  ['package-lock.json', 'npm'],
  ['npm-shrinkwrap.json', 'npm'],
  ['pnpm-lock.yaml', 'pnpm'],
  ['yarn.lock', 'yarn'],
  ['bun.lock', 'bun'],
  ['bun.lockb', 'bun'],
];

/** Dependencies that name the framework, most specific first (a Next app also depends on react…). */
const FRAMEWORKS: ReadonlyArray<readonly [string, string]> = [
  ['next', 'nextjs'],
  ['nuxt', 'nuxt'],
  ['@remix-run/node', 'remix'],
  ['@sveltejs/kit', 'sveltekit'],
  ['astro', 'astro'],
  ['@nestjs/core', 'nestjs'],
  ['express', 'express'],
  ['fastify', 'fastify'],
  ['koa', 'koa'],
  ['hono', 'hono'],
  ['@hapi/hapi', 'hapi'],
  ['vite', 'vite'],
];

/**
 * Build tools whose default output is a folder of files to serve, most specific first: a package
 * with a build script, one of these, and no way to start (no start script, main file or server.js)
 * is a front end whose build is served by the static file server. Only with no server framework
 * (the FRAMEWORKS above vite) and no server adapter: those build something to run, not to serve.
 */
const STATIC_OUTPUTS: ReadonlyArray<readonly [string, string]> = [
  ['astro', 'dist'],
  ['react-scripts', 'build'],
  ['@vue/cli-service', 'dist'],
  ['vite', 'dist'],
  ['parcel', 'dist'],
];
const SERVER_ADAPTERS = ['@astrojs/node', '@astrojs/vercel', '@astrojs/netlify', '@astrojs/cloudflare'];

interface PackageJson {
  scripts: Record<string, string>;
  main: string | null;
  engines: string | null;
  packageManager: string | null;
  /** `dependencies` and `devDependencies`: what names the framework. */
  dependencies: Set<string>;
  /** What an install has to do, or null when the package declares nothing to install. */
  installs: string | null;
}

/** Lifecycle scripts an install runs: a package with one of them has something to install. */
const INSTALL_SCRIPTS = ['preinstall', 'install', 'postinstall', 'prepare'] as const;
const DEPENDENCY_FIELDS = ['dependencies', 'devDependencies', 'optionalDependencies', 'peerDependencies', 'bundleDependencies', 'bundledDependencies'] as const;

/** `scripts.start` that is a plain `node <file> [args]`: no shell syntax, nothing npm would add but its own start-up. */
const PLAIN_NODE = /^node(\s+[A-Za-z0-9_./@:=,+-]+)+$/;

export const nodeDetector: Detector = {
  provider: 'node',
  markers: ['package.json'],
  async detect(tree) {
    const read = await tree.read('package.json');
    if (read.kind === 'absent') return null;
    const problem = read.kind === 'too_large' ? `package.json is larger than ${tree.limits.maxFileBytes} bytes and was not read` : null;
    const parsed = read.kind === 'text' ? parsePackageJson(read.text) : null;
    const pkg = parsed ?? { scripts: {}, main: null, engines: null, packageManager: null, dependencies: new Set<string>(), installs: 'unread' };
    const unreadable = problem ?? (parsed === null ? 'package.json is not a valid JSON object' : null);

    const lockfiles: Array<readonly [string, Manager]> = [];
    for (const entry of LOCKFILES) if (await tree.isFile(entry[0])) lockfiles.push(entry);
    const managers = [...new Set(lockfiles.map(([, manager]) => manager))];
    const declared = declaredManager(pkg.packageManager);
    const manager: Manager = declared ?? managers[0] ?? 'npm';
    const conflicting = declared === null && managers.length > 1 ? lockfiles.map(([file]) => file) : undefined;

    const runtimeEvidence = ['package.json'];
    if (pkg.engines !== null) runtimeEvidence.push(`engines.node ${JSON.stringify(pkg.engines)}`);
    const runtime =
      manager === 'bun'
        ? { ...chosen('bun', 'bun_lockfile', ...runtimeEvidence, 'bun is the package manager'), value: 'bun' as const }
        : { ...chosen('node', 'package_json', ...runtimeEvidence), value: 'node' as const };

    const detection: Detection = {
      provider: 'node',
      runtime,
      framework: frameworkOf(pkg.dependencies, unreadable),
      install: pkg.installs === null ? nothingToInstall() : await installOf(tree, manager, declared, lockfiles),
      build:
        pkg.scripts['build'] !== undefined
          ? chosen(runScript(manager, 'build'), 'build_script', `package.json scripts.build ${JSON.stringify(pkg.scripts['build'])}`)
          : chosen(null, 'no_build_script', unreadable ?? 'package.json has no scripts.build'),
      start: await startOf(tree, manager, pkg),
      scripts: parsed === null ? null : pkg.scripts,
      ...(conflicting ? { conflictingLockfiles: conflicting } : {}),
    };
    if (detection.start !== null) return detection;
    const output = staticOutputOf(pkg, detection.framework);
    if (output !== null) {
      const [dependency, folder] = output;
      const build = `package.json scripts.build ${JSON.stringify(pkg.scripts['build'])} and no start`;
      const served = `${dependency} builds ${folder}/, served by the hosting runtime's static file server`;
      return {
        ...detection,
        start: chosen(null, 'static_build_output', `${build}: ${served}`),
        staticRoot: chosen(folder, 'build_output', `${dependency} writes its build to ${folder}/ by default`),
      };
    }
    const startHint = unreadable
      ? `${unreadable}: fix it, or give startCommand`
      : 'package.json has no scripts.start and no main file, and there is no server.js: add a start script, or give startCommand';
    return { ...detection, startHint };
  },
};

function parsePackageJson(text: string): PackageJson | null {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    return null;
  }
  if (typeof json !== 'object' || json === null || Array.isArray(json)) return null;
  const record = json as Record<string, unknown>;
  const strings = (value: unknown): Record<string, string> =>
    typeof value === 'object' && value !== null && !Array.isArray(value)
      ? Object.fromEntries(Object.entries(value).filter((entry): entry is [string, string] => typeof entry[1] === 'string'))
      : {};
  const engines = strings(record['engines'])['node'] ?? null;
  const scripts = strings(record['scripts']);
  const declaresSome = (field: string) => {
    const value = record[field];
    return Array.isArray(value) ? value.length > 0 : typeof value === 'object' && value !== null && Object.keys(value).length > 0;
  };
  const installs =
    DEPENDENCY_FIELDS.find(declaresSome) ?? (record['workspaces'] !== undefined ? 'workspaces' : null) ?? INSTALL_SCRIPTS.find((script) => scripts[script] !== undefined) ?? null;
  return {
    installs,
    scripts,
    main: typeof record['main'] === 'string' && record['main'].trim() !== '' ? record['main'].trim() : null,
    engines,
    packageManager: typeof record['packageManager'] === 'string' ? record['packageManager'] : null,
    dependencies: new Set([...Object.keys(strings(record['dependencies'])), ...Object.keys(strings(record['devDependencies']))]),
  };
}

/** `pnpm@9.1.0` → pnpm; anything corepack would not run is ignored. */
function declaredManager(field: string | null): Manager | null {
  const name = field?.split('@')[0];
  return name === 'npm' || name === 'pnpm' || name === 'yarn' || name === 'bun' ? name : null;
}

function frameworkOf(dependencies: Set<string>, unreadable: string | null): Chosen {
  for (const [dependency, framework] of FRAMEWORKS) {
    if (dependencies.has(dependency)) return chosen(framework, 'dependency', `package.json depends on ${dependency}`);
  }
  return chosen(null, 'no_known_framework', unreadable ?? 'no dependency names a known framework');
}

/** A package.json declaring no dependency of any kind, no workspaces and no install script: an install would do nothing but start. */
function nothingToInstall(): Chosen {
  const fields = [...DEPENDENCY_FIELDS.slice(0, 4), 'workspaces', ...INSTALL_SCRIPTS.map((script) => `scripts.${script}`)];
  return chosen(null, 'nothing_to_install', `package.json declares none of ${fields.join(', ')}`);
}

async function installOf(tree: SourceTree, manager: Manager, declared: Manager | null, lockfiles: ReadonlyArray<readonly [string, Manager]>): Promise<Chosen> {
  const own = lockfiles.find(([, of]) => of === manager)?.[0] ?? null;
  // Only a packageManager field lets other managers' lockfiles stand: it says which one is used.
  const ignored = lockfiles.filter(([, of]) => of !== manager).map(([file]) => `${file} ignored`);
  const because = declared !== null ? [`package.json packageManager names ${declared}`, ...ignored] : [];
  if (own === null) {
    const command = manager === 'npm' ? 'npm install' : `${manager} install`;
    return chosen(command, 'no_lockfile', ...because, `no lockfile of ${manager}: dependencies resolve afresh on every build`);
  }
  const commands: Record<Manager, string> = {
    npm: 'npm ci',
    pnpm: 'pnpm install --frozen-lockfile',
    // Yarn 2+ (a .yarnrc.yml) spells the frozen install --immutable.
    yarn: (await tree.isFile('.yarnrc.yml')) ? 'yarn install --immutable' : 'yarn install --frozen-lockfile',
    bun: 'bun install --frozen-lockfile',
  };
  return chosen(commands[manager], 'lockfile', ...because, own);
}

/** The build tool and the folder it writes, when the package is a front end to serve once built. */
function staticOutputOf(pkg: PackageJson, framework: Chosen): readonly [string, string] | null {
  if (pkg.scripts['build'] === undefined) return null;
  if (framework.value !== null && framework.value !== 'astro' && framework.value !== 'vite') return null;
  if (SERVER_ADAPTERS.some((adapter) => pkg.dependencies.has(adapter))) return null;
  return STATIC_OUTPUTS.find(([dependency]) => pkg.dependencies.has(dependency)) ?? null;
}

function runScript(manager: Manager, script: string): string {
  return manager === 'yarn' ? `yarn ${script}` : `${manager} run ${script}`;
}

async function startOf(tree: SourceTree, manager: Manager, pkg: PackageJson): Promise<Chosen | null> {
  const script = pkg.scripts['start'];
  const around = ['prestart', 'poststart'].filter((name) => pkg.scripts[name] !== undefined);
  if (script !== undefined && PLAIN_NODE.test(script.trim()) && around.length === 0) {
    // What `npm start` would run, without npm: its own start-up (~0.5 s) on every start, rollback and restart.
    return chosen(script.trim(), 'start_script_node', `package.json scripts.start ${JSON.stringify(script)}`, 'no prestart or poststart: run as written, not through the package manager');
  }
  if (script !== undefined) {
    const command = manager === 'bun' ? 'bun run start' : `${manager} start`;
    return chosen(command, 'start_script', `package.json scripts.start ${JSON.stringify(script)}`);
  }
  if (pkg.main !== null) {
    // Node resolves main as a file, then with .js, then as a folder's index.js.
    const main = pkg.main.replace(/^\.\//, '');
    const file = await firstFile(tree, [main, `${main}.js`, `${main}/index.js`]);
    if (file !== null) return chosen(`node ${file}`, 'main_field', `package.json main ${JSON.stringify(pkg.main)}`, `${file} exists`);
  }
  // `npm start` without a start script runs `node server.js`; so does this.
  if (await tree.isFile('server.js')) return chosen('node server.js', 'server_js', 'no scripts.start; server.js exists (what npm start runs by default)');
  return null;
}
