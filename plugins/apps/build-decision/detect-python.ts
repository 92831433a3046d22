import { type Detection, type Detector, chosen, firstFile } from './detection.ts';
import { normalizePackageName, requirementsTxtNames, tomlDependencyNames } from './python-dependencies.ts';
import type { SourceTree } from './source-tree.ts';
import type { Chosen } from './types.ts';

/**
 * Python apps: requirements.txt, pyproject.toml or Pipfile. The framework and the server come from
 * the declared dependencies; the start command names the module and variable that hold the app,
 * read from the common entry files (`app = Flask(__name__)` in app.py → `gunicorn app:app`). A server
 * the app does not declare is never assumed: it would not be installed.
 */
const MANIFESTS = ['requirements.txt', 'pyproject.toml', 'Pipfile'] as const;

/** Framework dependencies, most specific first (FastAPI is built on Starlette). */
const FRAMEWORKS = ['django', 'fastapi', 'flask', 'starlette'] as const;
type Framework = (typeof FRAMEWORKS)[number];

const ASGI_ENTRIES = ['main.py', 'app.py', 'app/main.py', 'src/main.py'];
const WSGI_ENTRIES = ['app.py', 'main.py', 'wsgi.py', 'application.py'];
const MAIN_ENTRIES = ['main.py', 'app.py'];

export const pythonDetector: Detector = {
  provider: 'python',
  markers: MANIFESTS,
  async detect(tree) {
    const manifests: string[] = [];
    /** Each declared package, with the first manifest that declares it. */
    const declaredIn = new Map<string, string>();
    for (const manifest of MANIFESTS) {
      const text = await tree.readText(manifest);
      if (text === null) continue;
      manifests.push(manifest);
      const names = manifest === 'requirements.txt' ? requirementsTxtNames(text) : tomlDependencyNames(text);
      for (const name of names) if (!declaredIn.has(name)) declaredIn.set(name, manifest);
    }
    if (manifests.length === 0 && !(await hasAnyManifest(tree))) return null;

    const dependencies = new Set(declaredIn.keys());
    const framework = FRAMEWORKS.find((name) => dependencies.has(name)) ?? null;
    const start = await startOf(tree, framework, dependencies);
    return {
      provider: 'python',
      runtime: { ...(await runtimeOf(tree, manifests)), value: 'python' as const },
      framework:
        framework === null
          ? chosen(null, 'no_known_framework', 'no dependency names a known framework')
          : chosen(framework, 'dependency', `${declaredIn.get(framework)} declares ${framework}`),
      install: await installOf(tree),
      build: chosen(null, 'no_build_step', 'a Python app is run from its sources'),
      start: start.chosen,
      scripts: null,
      ...(start.hint ? { startHint: start.hint } : {}),
    } satisfies Detection;
  },
};

/** A manifest too large to read still makes the folder a Python app. */
async function hasAnyManifest(tree: SourceTree): Promise<boolean> {
  return (await firstFile(tree, MANIFESTS)) !== null;
}

async function runtimeOf(tree: SourceTree, manifests: string[]): Promise<Chosen> {
  const evidence = [...manifests];
  for (const file of ['.python-version', 'runtime.txt']) {
    const version = (await tree.readText(file))?.trim();
    if (version) evidence.push(`${file} ${JSON.stringify(version.split(/\r?\n/)[0])}`);
  }
  return chosen('python', 'python_manifest', ...evidence);
}

async function installOf(tree: SourceTree): Promise<Chosen> {
  if (await tree.isFile('requirements.txt')) return chosen('pip install -r requirements.txt', 'requirements_txt', 'requirements.txt');
  if (await tree.isFile('Pipfile')) {
    return (await tree.isFile('Pipfile.lock'))
      ? chosen('pipenv install --deploy', 'pipfile_lock', 'Pipfile', 'Pipfile.lock')
      : chosen('pipenv install', 'pipfile', 'Pipfile', 'no Pipfile.lock: dependencies resolve afresh on every build');
  }
  if (await tree.isFile('uv.lock')) return chosen('uv sync --frozen', 'uv_lock', 'pyproject.toml', 'uv.lock');
  if (await tree.isFile('poetry.lock')) return chosen('poetry install --no-root', 'poetry_lock', 'pyproject.toml', 'poetry.lock');
  return chosen('pip install .', 'pyproject_toml', 'pyproject.toml', 'no lockfile: pip installs the project and its dependencies');
}

interface Start {
  chosen: Chosen | null;
  hint?: string;
}

const has = (dependencies: Set<string>, ...names: string[]) => names.some((name) => dependencies.has(normalizePackageName(name)) || dependencies.has(name));

async function startOf(tree: SourceTree, framework: Framework | null, dependencies: Set<string>): Promise<Start> {
  const gunicorn = has(dependencies, 'gunicorn');
  if (framework === 'django') {
    if (await tree.isFile('manage.py')) {
      const project = await djangoProject(tree);
      if (project !== null && gunicorn) {
        return { chosen: chosen(`gunicorn ${project}.wsgi --bind 0.0.0.0:$PORT`, 'django_gunicorn', 'manage.py', `${project}/wsgi.py`, 'gunicorn is declared') };
      }
      return {
        chosen: chosen('python manage.py runserver 0.0.0.0:$PORT', 'django_runserver', 'manage.py', "gunicorn is not declared: Django's own server runs the app"),
      };
    }
  }
  if (framework === 'fastapi' || framework === 'starlette') {
    const entry = await appVariable(tree, ASGI_ENTRIES, /^(\w+)\s*(?::[^=]+)?=\s*(?:fastapi\.)?(?:FastAPI|Starlette)\(/m);
    if (entry !== null) {
      if (has(dependencies, 'uvicorn', 'uvicorn[standard]', 'fastapi[standard]', 'fastapi[all]')) {
        return {
          chosen: chosen(`uvicorn ${entry.module}:${entry.variable} --host 0.0.0.0 --port $PORT`, 'asgi_uvicorn', `${entry.file} defines ${entry.variable}`, 'uvicorn is declared'),
        };
      }
      return { chosen: null, hint: `${entry.file} defines an ASGI app, but no server is declared: add uvicorn to the dependencies, or give startCommand` };
    }
  }
  if (framework === 'flask' && gunicorn) {
    const entry = await appVariable(tree, WSGI_ENTRIES, /^(\w+)\s*(?::[^=]+)?=\s*(?:flask\.)?Flask\(/m);
    if (entry !== null) {
      return { chosen: chosen(`gunicorn ${entry.module}:${entry.variable} --bind 0.0.0.0:$PORT`, 'wsgi_gunicorn', `${entry.file} defines ${entry.variable}`, 'gunicorn is declared') };
    }
  }
  for (const file of MAIN_ENTRIES) {
    const text = await tree.readText(file);
    if (text !== null && /^if\s+__name__\s*==\s*["']__main__["']\s*:/m.test(text)) {
      return { chosen: chosen(`python ${file}`, 'python_main_guard', `${file} runs itself under if __name__ == "__main__"`) };
    }
  }
  const hint =
    framework === null
      ? 'no Procfile, no known framework and no main.py or app.py that runs itself: add a Procfile with a web: line, or give startCommand'
      : `no entry file that creates the ${framework} app was found among ${(framework === 'flask' ? WSGI_ENTRIES : ASGI_ENTRIES).join(', ')}${framework === 'flask' && !gunicorn ? ', and gunicorn is not declared' : ''}: add a Procfile with a web: line, or give startCommand`;
  return { chosen: null, hint };
}

/** The module and variable that hold the app in the first entry file that defines one. */
async function appVariable(tree: SourceTree, entries: string[], pattern: RegExp): Promise<{ file: string; module: string; variable: string } | null> {
  for (const file of entries) {
    const text = await tree.readText(file);
    const match = text === null ? null : pattern.exec(text);
    if (match) return { file, module: file.replace(/\.py$/, '').split('/').join('.'), variable: match[1]! };
  }
  return null;
}

/** The Django project package: the top-level folder holding wsgi.py (the first by name). */
async function djangoProject(tree: SourceTree): Promise<string | null> {
  for (const entry of await tree.list()) {
    if (entry.kind === 'dir' && (await tree.isFile(`${entry.name}/wsgi.py`))) return entry.name;
  }
  return null;
}
