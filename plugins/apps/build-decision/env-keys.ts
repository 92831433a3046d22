import type { SourceTree } from './source-tree.ts';

/**
 * Which variables an app asks for, from the example env file it commits, and which of them nothing
 * has set. The file is the first of these in the app's root directory; values are never kept, since
 * an example file sometimes holds a real secret by mistake.
 */
export const ENV_EXAMPLE_FILES = ['.env.example', '.env.sample', '.env.template'] as const;

/** Variables the service sets in every app itself (the spec's managed variables, and the port to listen on). */
export const SERVICE_SET_ENV = ['PORT', 'SVC_API_KEY', 'SVC_BASE_URL', 'SVC_MCP_URL'] as const;

/** What the service provides to an app: always SERVICE_SET_ENV, and DATABASE_URL with a provided database. */
export function serviceProvidedEnv(options: { databaseProvided: boolean }): string[] {
  return options.databaseProvided ? [...SERVICE_SET_ENV, 'DATABASE_URL'] : [...SERVICE_SET_ENV];
}

export interface EnvKeys {
  /** The names, in the order the file first names them. */
  readonly keys: string[];
  /** The file read, or null when the folder commits none. */
  readonly file: string | null;
}

export async function readEnvKeys(tree: SourceTree): Promise<EnvKeys> {
  for (const file of ENV_EXAMPLE_FILES) {
    const found = await tree.read(file);
    if (found.kind === 'text') return { keys: parseEnvNames(found.text), file };
    // A file too large to be an example is still the one the app commits: it asks for nothing we can read.
    if (found.kind === 'too_large') return { keys: [], file };
  }
  return { keys: [], file: null };
}

const ASSIGNMENT = /^[ \t]*(?:export[ \t]+)?([A-Za-z_][A-Za-z0-9_.-]*)[ \t]*=/;

/**
 * The variable names of a dotenv file, as the dotenv libraries read it: `#` comments, blank lines,
 * `export NAME=…`, and quoted values, which may span lines (a PEM key): the lines inside a quote are
 * value, not names. A line that assigns nothing is skipped.
 */
export function parseEnvNames(text: string): string[] {
  const names: string[] = [];
  const seen = new Set<string>();
  let at = 0;
  while (at < text.length) {
    const lineEnd = endOfLine(text, at);
    const line = text.slice(at, lineEnd);
    const match = ASSIGNMENT.exec(line);
    if (match === null) {
      at = lineEnd + 1;
      continue;
    }
    const name = match[1]!;
    if (!seen.has(name)) {
      seen.add(name);
      names.push(name);
    }
    at = endOfValue(text, at + match[0].length);
  }
  return names;
}

function endOfLine(text: string, from: number): number {
  const newline = text.indexOf('\n', from);
  return newline === -1 ? text.length : newline;
}

/** Where the line after a value starts: past a closing quote when the value is quoted, else past the line. */
function endOfValue(text: string, from: number): number {
  let at = from;
  while (text[at] === ' ' || text[at] === '\t') at++;
  const quote = text[at];
  if (quote === '"' || quote === "'" || quote === '`') {
    for (let i = at + 1; i < text.length; i++) {
      if (text[i] === '\\')
        i++; // an escaped quote does not close the value (dotenv reads \' and \" alike)
      else if (text[i] === quote) return endOfLine(text, i) + 1;
    }
    // Never closed: dotenv reads the rest of that line as the value; so do we.
  }
  return endOfLine(text, at) + 1;
}

/** Where a variable can be set before the app runs: each a list of names. */
export interface EnvSources {
  /** Sent with this deploy (`env` of the request). */
  readonly caller?: Iterable<string>;
  /** Already stored for the service. */
  readonly stored?: Iterable<string>;
  /** Set by the service itself (serviceProvidedEnv). */
  readonly serviceProvided?: Iterable<string>;
}

/**
 * The envKeys nothing sets, in envKeys' order. Null stays null: before a deploy recorded a decision
 * nothing is known to be missing.
 */
export function missingEnv(envKeys: readonly string[] | null, sources: EnvSources): string[] | null {
  if (envKeys === null) return null;
  const set = new Set<string>([...(sources.caller ?? []), ...(sources.stored ?? []), ...(sources.serviceProvided ?? [])]);
  return envKeys.filter((name) => !set.has(name));
}
