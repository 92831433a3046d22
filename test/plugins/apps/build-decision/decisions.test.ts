import t from 'tap';
import { decideBuild, SourceTree } from '../../../../plugins/apps/build-decision/index.ts';
import type { BuildDecision } from '../../../../plugins/apps/build-decision/types.ts';
import { AVAILABLE, fixture, scratchRepository } from './fixtures.ts';

/**
 * The decision for each fixture repository, whole: every field's value, rule and evidence. A change
 * to any rule shows here as a diff of what a customer would read.
 */
async function decisionOf(name: string, options: Parameters<typeof decideBuild>[1] = {}): Promise<BuildDecision> {
  const result = await decideBuild(await fixture(name), { available: AVAILABLE, ...options });
  if (!result.ok) throw new Error(`${name}: ${result.error.code}: ${result.error.message}`);
  return result.decision;
}

const top = { value: '.', rule: 'repository_top', evidence: ['the top of the repository is an app'] };

t.test('node-express: npm ci from package-lock.json, scripts.start run as written (a plain node command), envKeys from .env.example', async (t) => {
  t.same(await decisionOf('node-express'), {
    rootDir: top,
    provider: 'node',
    runtime: { value: 'node', rule: 'package_json', evidence: ['package.json', 'engines.node ">=20"'] },
    framework: { value: 'express', rule: 'dependency', evidence: ['package.json depends on express'] },
    install: { value: 'npm ci', rule: 'lockfile', evidence: ['package-lock.json'] },
    build: { value: null, rule: 'no_build_script', evidence: ['package.json has no scripts.build'] },
    start: {
      value: 'node server.js',
      rule: 'start_script_node',
      evidence: ['package.json scripts.start "node server.js"', 'no prestart or poststart: run as written, not through the package manager'],
    },
    staticRoot: null,
    alsoMatched: [],
    envKeys: ['DATABASE_URL', 'SESSION_SECRET', 'STRIPE_KEY', 'PRIVATE_KEY', 'PORT'],
    envFile: '.env.example',
  });
});

t.test('node-pnpm: the pnpm lockfile picks pnpm for install and build; the plain node start runs without it', async (t) => {
  t.same(await decisionOf('node-pnpm'), {
    rootDir: top,
    provider: 'node',
    runtime: { value: 'node', rule: 'package_json', evidence: ['package.json'] },
    framework: { value: 'fastify', rule: 'dependency', evidence: ['package.json depends on fastify'] },
    install: { value: 'pnpm install --frozen-lockfile', rule: 'lockfile', evidence: ['pnpm-lock.yaml'] },
    build: { value: 'pnpm run build', rule: 'build_script', evidence: ['package.json scripts.build "tsc -p ."'] },
    start: {
      value: 'node dist/server.js',
      rule: 'start_script_node',
      evidence: ['package.json scripts.start "node dist/server.js"', 'no prestart or poststart: run as written, not through the package manager'],
    },
    staticRoot: null,
    alsoMatched: [],
    envKeys: [],
    envFile: null,
  });
});

t.test('node-bun: a bun lockfile makes bun the runtime', async (t) => {
  t.same(await decisionOf('node-bun', { available: ['bun'] }), {
    rootDir: top,
    provider: 'node',
    runtime: { value: 'bun', rule: 'bun_lockfile', evidence: ['package.json', 'bun is the package manager'] },
    framework: { value: 'hono', rule: 'dependency', evidence: ['package.json depends on hono'] },
    install: { value: 'bun install --frozen-lockfile', rule: 'lockfile', evidence: ['bun.lock'] },
    build: { value: null, rule: 'no_build_script', evidence: ['package.json has no scripts.build'] },
    start: { value: 'bun run start', rule: 'start_script', evidence: ['package.json scripts.start "bun server.js"'] },
    staticRoot: null,
    alsoMatched: [],
    envKeys: [],
    envFile: null,
  });
});

t.test('node-and-python: node is asked first and decides; python and static also matched', async (t) => {
  t.same(await decisionOf('node-and-python'), {
    rootDir: top,
    provider: 'node',
    runtime: { value: 'node', rule: 'package_json', evidence: ['package.json'] },
    framework: { value: 'express', rule: 'dependency', evidence: ['package.json depends on express'] },
    install: { value: 'npm install', rule: 'no_lockfile', evidence: ['no lockfile of npm: dependencies resolve afresh on every build'] },
    build: { value: null, rule: 'no_build_script', evidence: ['package.json has no scripts.build'] },
    start: { value: 'node src/index.js', rule: 'main_field', evidence: ['package.json main "src/index"', 'src/index.js exists'] },
    staticRoot: null,
    alsoMatched: ['python', 'static'],
    envKeys: [],
    envFile: null,
  });
});

t.test('python-flask-procfile: the Procfile web line starts it', async (t) => {
  t.same(await decisionOf('python-flask-procfile'), {
    rootDir: top,
    provider: 'python',
    runtime: { value: 'python', rule: 'python_manifest', evidence: ['requirements.txt'] },
    framework: { value: 'flask', rule: 'dependency', evidence: ['requirements.txt declares flask'] },
    install: { value: 'pip install -r requirements.txt', rule: 'requirements_txt', evidence: ['requirements.txt'] },
    build: { value: null, rule: 'no_build_step', evidence: ['a Python app is run from its sources'] },
    start: {
      value: 'gunicorn app:app --bind 0.0.0.0:$PORT --workers 2',
      rule: 'procfile_web',
      evidence: ['Procfile web: gunicorn app:app --bind 0.0.0.0:$PORT --workers 2'],
    },
    staticRoot: null,
    alsoMatched: [],
    envKeys: ['SECRET_KEY', 'MAIL_SERVER'],
    envFile: '.env.sample',
  });
});

t.test('python-fastapi: uvicorn serves the variable main.py assigns FastAPI() to', async (t) => {
  t.same(await decisionOf('python-fastapi'), {
    rootDir: top,
    provider: 'python',
    runtime: { value: 'python', rule: 'python_manifest', evidence: ['requirements.txt', '.python-version "3.12"'] },
    framework: { value: 'fastapi', rule: 'dependency', evidence: ['requirements.txt declares fastapi'] },
    install: { value: 'pip install -r requirements.txt', rule: 'requirements_txt', evidence: ['requirements.txt'] },
    build: { value: null, rule: 'no_build_step', evidence: ['a Python app is run from its sources'] },
    start: { value: 'uvicorn main:api --host 0.0.0.0 --port $PORT', rule: 'asgi_uvicorn', evidence: ['main.py defines api', 'uvicorn is declared'] },
    staticRoot: null,
    alsoMatched: [],
    envKeys: ['OPENAI_API_KEY', 'SVC_API_KEY'],
    envFile: '.env.template',
  });
});

t.test('python-django: pyproject.toml with uv.lock, gunicorn on the project wsgi module', async (t) => {
  t.same(await decisionOf('python-django'), {
    rootDir: top,
    provider: 'python',
    runtime: { value: 'python', rule: 'python_manifest', evidence: ['pyproject.toml'] },
    framework: { value: 'django', rule: 'dependency', evidence: ['pyproject.toml declares django'] },
    install: { value: 'uv sync --frozen', rule: 'uv_lock', evidence: ['pyproject.toml', 'uv.lock'] },
    build: { value: null, rule: 'no_build_step', evidence: ['a Python app is run from its sources'] },
    start: { value: 'gunicorn mysite.wsgi --bind 0.0.0.0:$PORT', rule: 'django_gunicorn', evidence: ['manage.py', 'mysite/wsgi.py', 'gunicorn is declared'] },
    staticRoot: null,
    alsoMatched: [],
    envKeys: [],
    envFile: null,
  });
});

const goRuntime = (version: string) => ({ value: 'go', rule: 'go_mod', evidence: ['go.mod', `go directive ${version}`] });

t.test('go-http: go build of the main package at the top, then the binary', async (t) => {
  t.same(await decisionOf('go-http'), {
    rootDir: top,
    provider: 'go',
    runtime: goRuntime('1.22'),
    framework: { value: 'chi', rule: 'dependency', evidence: ['go.mod requires github.com/go-chi/chi'] },
    install: { value: 'go mod download', rule: 'go_mod', evidence: ['go.mod'] },
    build: { value: 'go build -o app .', rule: 'go_main_package', evidence: ['package main in main.go'] },
    start: { value: './app', rule: 'go_built_binary', evidence: ['the binary go build made from .'] },
    staticRoot: null,
    alsoMatched: [],
    envKeys: [],
    envFile: null,
  });
});

t.test('go-cmd: the one main package under cmd/ is built', async (t) => {
  const decision = await decisionOf('go-cmd');
  t.same(decision.build, { value: 'go build -o app ./cmd/server', rule: 'go_main_package', evidence: ['package main in cmd/server/main.go'] });
  t.same(decision.framework, { value: null, rule: 'no_known_framework', evidence: ['go.mod requires no known framework (net/http, presumably)'] });
});

t.test("static-site: served by the runtime's static file server, which start.rule says", async (t) => {
  t.same(await decisionOf('static-site'), {
    rootDir: top,
    provider: 'static',
    runtime: { value: 'static', rule: 'index_html', evidence: ['index.html'] },
    framework: { value: null, rule: 'plain_files', evidence: ['index.html with no build manifest'] },
    install: { value: null, rule: 'nothing_to_install', evidence: ['a static site has no dependencies to install'] },
    build: { value: null, rule: 'no_build_step', evidence: ['the files are served as committed'] },
    start: {
      value: null,
      rule: 'static_file_server',
      evidence: ["index.html: the files are served by the hosting runtime's static file server; no command runs"],
    },
    staticRoot: { value: '.', rule: 'committed_files', evidence: ['the folder is served as committed'] },
    alsoMatched: [],
    envKeys: [],
    envFile: null,
  });
});

t.test('static-spa: a committed 200.html and 404.html are named in the evidence (the fallbacks)', async (t) => {
  const decision = await decisionOf('static-spa');
  t.same(decision.start, {
    value: null,
    rule: 'static_file_server',
    evidence: [
      "index.html: the files are served by the hosting runtime's static file server; no command runs",
      '200.html: paths with no file (and no extension) answer with it, as a single-page app',
      '404.html: answered, with status 404, for paths with no file',
    ],
  });
  t.same(decision.staticRoot, { value: '.', rule: 'committed_files', evidence: ['the folder is served as committed'] });
});

t.test('node-vite-spa: a build script, vite and no start: its dist/ is served by the static file server', async (t) => {
  const noLockfile = 'no lockfile of npm: dependencies resolve afresh on every build';
  const server = "hosting runtime's static file server";
  t.same(await decisionOf('node-vite-spa'), {
    rootDir: top,
    provider: 'node',
    runtime: { value: 'node', rule: 'package_json', evidence: ['package.json'] },
    framework: { value: 'vite', rule: 'dependency', evidence: ['package.json depends on vite'] },
    install: { value: 'npm install', rule: 'no_lockfile', evidence: [noLockfile] },
    build: { value: 'npm run build', rule: 'build_script', evidence: ['package.json scripts.build "vite build"'] },
    start: {
      value: null,
      rule: 'static_build_output',
      evidence: [`package.json scripts.build "vite build" and no start: vite builds dist/, served by the ${server}`],
    },
    staticRoot: { value: 'dist', rule: 'build_output', evidence: ['vite writes its build to dist/ by default'] },
    alsoMatched: ['static'],
    envKeys: [],
    envFile: null,
  });
});

t.test('node-vite-spa with a startCommand: the command runs, nothing is served statically', async (t) => {
  const decision = await decisionOf('node-vite-spa', { overrides: { startCommand: 'npm run dev' } });
  t.equal(decision.start.value, 'npm run dev');
  t.equal(decision.staticRoot, null);
});

t.test('monorepo-one-app: the only folder that builds becomes the root directory', async (t) => {
  const decision = await decisionOf('monorepo-one-app');
  t.same(decision.rootDir, { value: 'service', rule: 'only_app_folder', evidence: ['the top of the repository is no app', 'service is the only folder below it that is one'] });
  t.equal(decision.provider, 'go');
  t.equal(decision.start.value, './app');
});

t.test('monorepo-two-apps: a rootDir naming one of them decides for that folder', async (t) => {
  const decision = await decisionOf('monorepo-two-apps', { rootDir: 'apps/api/' });
  t.same(decision.rootDir, { value: 'apps/api', rule: 'caller_root_dir', evidence: ['rootDir "apps/api/" given'] });
  t.equal(decision.provider, 'python');
  t.equal(decision.start.value, 'uvicorn main:api --host 0.0.0.0 --port $PORT');
});

t.test("the caller's commands come first, before the Procfile and the provider", async (t) => {
  const decision = await decisionOf('python-flask-procfile', {
    overrides: { startCommand: 'gunicorn app:app -b 0.0.0.0:$PORT', buildCommand: 'python -m compileall .', installCommand: 'pip install -r requirements.txt --no-cache-dir' },
  });
  t.same(decision.start, { value: 'gunicorn app:app -b 0.0.0.0:$PORT', rule: 'caller_start_command', evidence: ['startCommand given with the request'] });
  t.same(decision.build, { value: 'python -m compileall .', rule: 'caller_build_command', evidence: ['buildCommand given with the request'] });
  t.same(decision.install, { value: 'pip install -r requirements.txt --no-cache-dir', rule: 'caller_install_command', evidence: ['installCommand given with the request'] });
});

t.test('a start command given for an app whose start cannot be read makes it deployable', async (t) => {
  const decision = await decisionOf('node-no-start', { overrides: { startCommand: 'node --test' } });
  t.same(decision.start, { value: 'node --test', rule: 'caller_start_command', evidence: ['startCommand given with the request'] });
  t.same(decision.framework.value, 'koa');
});

t.test('an installCommand settles two lockfiles: the caller said which manager', async (t) => {
  const decision = await decisionOf('node-two-lockfiles', { overrides: { installCommand: 'yarn install --frozen-lockfile' } });
  t.equal(decision.install.value, 'yarn install --frozen-lockfile');
  t.equal(decision.start.value, 'node index.js');
});

t.test('a start script around which npm runs prestart or poststart is started through npm', async (t) => {
  const root = scratchRepository(t, {
    'package.json': JSON.stringify({ scripts: { prestart: 'node migrate.js', start: 'node server.js' } }),
    'server.js': '',
    'migrate.js': '',
  });
  const result = await decideBuild(await SourceTree.open(root), { available: AVAILABLE });
  t.same(result.ok && result.decision.start, { value: 'npm start', rule: 'start_script', evidence: ['package.json scripts.start "node server.js"'] });
});

t.test('a start script with shell syntax is started through npm', async (t) => {
  const root = scratchRepository(t, { 'package.json': JSON.stringify({ scripts: { start: 'node server.js && echo done' } }), 'server.js': '' });
  const result = await decideBuild(await SourceTree.open(root), { available: AVAILABLE });
  t.equal(result.ok && result.decision.start.value, 'npm start');
});

t.test('a package declaring nothing to install is not installed', async (t) => {
  const root = scratchRepository(t, { 'package.json': JSON.stringify({ scripts: { start: 'node server.js' } }), 'server.js': '' });
  const result = await decideBuild(await SourceTree.open(root), { available: AVAILABLE });
  t.same(result.ok && result.decision.install, {
    value: null,
    rule: 'nothing_to_install',
    evidence: [
      'package.json declares none of dependencies, devDependencies, optionalDependencies, peerDependencies, workspaces, ' +
        'scripts.preinstall, scripts.install, scripts.postinstall, scripts.prepare',
    ],
  });
});

t.test('a dependency of any kind, workspaces or an install script make an install', async (t) => {
  const cases: Array<[string, Record<string, unknown>]> = [
    ['dependencies', { dependencies: { a: '1' } }],
    ['devDependencies', { devDependencies: { a: '1' } }],
    ['optionalDependencies', { optionalDependencies: { a: '1' } }],
    ['workspaces', { workspaces: ['packages/*'] }],
    ['postinstall', { scripts: { postinstall: 'node setup.js' } }],
    ['prepare', { scripts: { prepare: 'node setup.js' } }],
  ];
  for (const [what, pkg] of cases) {
    const root = scratchRepository(t, { 'package.json': JSON.stringify({ ...pkg, main: 'server.js' }), 'server.js': '' });
    const result = await decideBuild(await SourceTree.open(root), { available: AVAILABLE });
    t.equal(result.ok && result.decision.install.value, 'npm install', what);
  }
});
