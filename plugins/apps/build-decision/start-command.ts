import { split } from 'shlex';
import type { SourceTree } from './source-tree.ts';

/**
 * Whether a start command is finished: a command that cannot start the app (a bare `node`, one that
 * ends in a folder, an unclosed quote) is refused before a deploy, rather than failing after a build
 * as a crash loop. Each problem is said as what to change. The words are the shell's: shlex (a POSIX
 * tokenizer) splits them, so a quote is judged as the shell will judge it.
 */
export const MAX_START_COMMAND_CHARS = 300;

export interface CommandContext {
  /** The app's root directory, where the command runs. */
  readonly tree: SourceTree;
  /** package.json's scripts, for `npm run x`; null when the app has no readable package.json. */
  readonly scripts: Readonly<Record<string, string>> | null;
}

/** The command's shape alone (one line, length, trailing operator, quoting): also for build and install commands. */
export function commandShapeProblem(command: string, maxChars = MAX_START_COMMAND_CHARS): string | null {
  const text = command.trim();
  if (text === '') return 'is empty: give the command itself';
  if (/[\r\n]/.test(text)) return 'has several lines: make it one line (join the steps with &&), or put the steps in a script and run that';
  if (text.length > maxChars) return `is ${text.length} characters, over the limit of ${maxChars}: put the steps in a script in the repository and run that`;
  if (text.endsWith('\\')) return 'ends with a backslash, which continues onto a line that is not there: remove it';
  const operator = TRAILING_OPERATORS.find((candidate) => text.endsWith(candidate));
  if (operator !== undefined) return `ends with "${operator}", so it is missing what comes after: finish the command, or remove "${operator}"`;
  try {
    split(text);
  } catch {
    return 'has an unclosed quote: close it, so the shell can tell where each word ends';
  }
  return null;
}

// Longest first: `&&` before `&`, `||` before `|`.
const TRAILING_OPERATORS = ['&&', '||', '|', ';', '&'];
const SEPARATORS = new Set(['&&', '||', '|', ';', '&']);

/** Programs that start nothing by themselves: alone, the command is unfinished. */
const BARE = /^(?:node|nodejs|python(?:\d+(?:\.\d+)?)?|go|npm|npx|pnpm|yarn|bun|deno|tsx|ts-node|ruby|php|java|sh|bash|gunicorn|uvicorn)$/;

interface FileRunner {
  /** Options that take the next word as their value. */
  readonly valueFlags: ReadonlySet<string>;
  /** Options after which no script file follows (inline code, a module, a test run). */
  readonly noScript: ReadonlySet<string>;
}

const NODE: FileRunner = {
  valueFlags: new Set(['-r', '--require', '--import', '--loader', '--experimental-loader', '--env-file', '--input-type', '-C', '--conditions', '--title']),
  noScript: new Set(['-e', '--eval', '-p', '--print', '-i', '--interactive', '--test', '-v', '--version', '-h', '--help']),
};
const PYTHON: FileRunner = { valueFlags: new Set(['-W', '-X']), noScript: new Set(['-c', '-m', '-V', '--version', '-h', '--help', '-i']) };
const DENO: FileRunner = { valueFlags: new Set(['-c', '--config', '--import-map', '--location', '--lock', '--cert', '--env-file']), noScript: new Set() };

function fileRunner(program: string): FileRunner | null {
  if (/^(?:node|nodejs|tsx|ts-node)$/.test(program)) return NODE;
  if (/^python(?:\d+(?:\.\d+)?)?$/.test(program)) return PYTHON;
  return null;
}

/** The problem with a start command, said as what to change, or null when it can start the app. */
export async function startCommandProblem(command: string, context: CommandContext): Promise<string | null> {
  const shape = commandShapeProblem(command);
  if (shape !== null) return shape;
  let cwd = '';
  for (const segment of segmentsOf(split(command.trim()))) {
    const words = withoutPrefixes(segment);
    const [word, ...args] = words;
    if (word === undefined) continue;
    const program = word.split('/').pop()!;
    if (program === 'cd') {
      const target = args[0];
      if (target === undefined || target.includes('$')) continue;
      const folder = joinPath(cwd, target);
      if (folder === null || !(await context.tree.isDirectory(folder))) return `changes to the folder ${target}, which the app's root directory does not have: fix the path`;
      cwd = folder;
      continue;
    }
    if (args.length === 0 && BARE.test(program)) return `runs "${program}" alone, which starts no app: ${BARE_EXAMPLES[program] ?? 'name what it should run'}`;
    const problem = await segmentProblem(program, args, cwd, context);
    if (problem !== null) return problem;
  }
  return null;
}

const BARE_EXAMPLES: Record<string, string> = {
  node: 'name the file to run, like "node server.js"',
  python: 'name the file or module to run, like "python app.py"',
  python3: 'name the file or module to run, like "python3 app.py"',
  go: 'run the built binary, like "./app", or give "go run ."',
  npm: 'name the script, like "npm start" or "npm run serve"',
  pnpm: 'name the script, like "pnpm start"',
  yarn: 'name the script, like "yarn start"',
  bun: 'name the file or script, like "bun run start"',
  deno: 'name the file, like "deno run --allow-net main.ts"',
};

async function segmentProblem(program: string, args: string[], cwd: string, context: CommandContext): Promise<string | null> {
  const runner = fileRunner(program);
  if (runner !== null) return scriptFileProblem(program, args, runner, cwd, context);
  if (program === 'deno') {
    if (args[0] !== 'run') return null;
    if (args.length === 1) return 'runs "deno run" with no file: name the file, like "deno run --allow-net main.ts"';
    return scriptFileProblem('deno run', args.slice(1), DENO, cwd, context);
  }
  if (program === 'npm' || program === 'pnpm' || program === 'yarn' || program === 'bun') return packageScriptProblem(program, args, cwd, context);
  return null;
}

/** `node server.js`: the file must exist, and must not be a folder (but a folder node can load: index.js, package.json). */
async function scriptFileProblem(program: string, args: string[], runner: FileRunner, cwd: string, context: CommandContext): Promise<string | null> {
  let index = 0;
  while (index < args.length && args[index]!.startsWith('-')) {
    const flag = args[index]!;
    if (runner.noScript.has(flag) || runner.noScript.has(flag.split('=')[0]!)) {
      return index === args.length - 1 && (flag === '-m' || flag === '-c' || flag === '-e') ? `ends with "${flag}", which needs a value after it: add it` : null;
    }
    index += runner.valueFlags.has(flag) ? 2 : 1;
  }
  const script = args[index];
  if (script === undefined) return `runs "${program}" with options only: name the file to run after them`;
  if (script.includes('$')) return null; // named by a variable: known only when it runs
  const path = joinPath(cwd, script);
  if (path === null) return null; // outside the app (an absolute path in the image): not ours to judge
  const { tree } = context;
  if (await tree.isDirectory(path)) {
    const loadable = runner === NODE && ((await tree.isFile(childOf(path, 'index.js'))) || (await tree.isFile(childOf(path, 'package.json'))));
    if (loadable) return null;
    const folder = script.replace(/\/+$/, '');
    const example = childOf(folder === '.' ? '' : folder, runner === PYTHON ? 'main.py' : 'index.js');
    return `ends in ${script}, which is a folder, not a file: name the file in it to run, like "${program} ${example}"`;
  }
  if (!(await tree.isFile(path))) return `runs ${script}, which is not in the app's root directory${cwd ? ` (in ${cwd})` : ''}: fix the file name, or commit the file`;
  return null;
}

/** `npm run x`, `npm start`: the script must exist in package.json (npm and pnpm start fall back to server.js). */
async function packageScriptProblem(manager: string, args: string[], cwd: string, context: CommandContext): Promise<string | null> {
  const [verb, ...rest] = args;
  let script: string | undefined;
  if (verb === 'run' || verb === 'run-script') {
    script = rest.find((word) => !word.startsWith('-'));
    if (script === undefined) return `runs "${manager} ${verb}" with no script name: name the script, like "${manager} run start"`;
  } else if (verb === 'start') {
    script = 'start';
  } else {
    return null; // other verbs (yarn's `yarn serve`, `npx …`) name things this check cannot see
  }
  if (script.includes('$')) return null;
  // A package.json in a folder the command changed to is another package's; its scripts are not read here.
  if (cwd !== '') return null;
  if (context.scripts !== null && context.scripts[script] !== undefined) return null;
  if (manager === 'bun' && (await context.tree.isFile(script))) return null; // `bun run file.ts` runs a file
  if (context.scripts === null) return `runs the package script "${script}", but the app has no readable package.json: add one, or run the file directly`;
  // npm and pnpm give a package with server.js the start script `node server.js` when it has none.
  if (script === 'start' && (manager === 'npm' || manager === 'pnpm') && (await context.tree.isFile('server.js'))) return null;
  const known = Object.keys(context.scripts);
  return `runs the package script "${script}", which package.json does not define${known.length > 0 ? ` (it defines ${known.join(', ')})` : ''}: add it, or name one it has`;
}

/** The words of each command in a list or pipeline (`a && b | c`). */
function segmentsOf(words: string[]): string[][] {
  const segments: string[][] = [[]];
  for (const word of words) {
    if (SEPARATORS.has(word)) segments.push([]);
    else segments[segments.length - 1]!.push(word);
  }
  return segments.filter((segment) => segment.length > 0);
}

/** The command itself, past variable assignments (`PORT=3000 node …`) and `exec` / `env`. */
function withoutPrefixes(words: string[]): string[] {
  let index = 0;
  while (index < words.length && (/^[A-Za-z_][A-Za-z0-9_]*=/.test(words[index]!) || words[index] === 'exec' || words[index] === 'env')) index++;
  return words.slice(index);
}

/** `cwd`/`relative` as a path inside the app, or null when it leaves it or is absolute. */
function joinPath(cwd: string, relative: string): string | null {
  if (relative.startsWith('/') || relative.startsWith('~')) return null;
  const parts = cwd === '' ? [] : cwd.split('/');
  for (const part of relative.split('/')) {
    if (part === '' || part === '.') continue;
    if (part === '..') {
      if (parts.length === 0) return null;
      parts.pop();
    } else parts.push(part);
  }
  return parts.join('/');
}

function childOf(folder: string, name: string): string {
  return folder === '' ? name : `${folder}/${name}`;
}
