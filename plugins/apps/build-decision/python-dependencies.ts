/**
 * The names of the packages a Python app declares, from the three manifests the python provider
 * reads. Versions, markers and sources are dropped: the decision needs to know only whether, say,
 * gunicorn is among them. Names are normalised as PEP 503 does (case, `_` and `.` are `-`), and an
 * extra is kept as `name[extra]` beside the name (`fastapi[standard]` brings uvicorn).
 */
export function normalizePackageName(name: string): string {
  return name.toLowerCase().replace(/[-_.]+/g, '-');
}

/** `fastapi[standard]>=0.110 ; python_version>"3.8"` → fastapi, fastapi[standard]. */
function namesOfRequirement(requirement: string): string[] {
  const match = /^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[([^\]]*)\])?/.exec(requirement);
  if (match === null) return [];
  const name = normalizePackageName(match[1]!);
  const extras = (match[2] ?? '')
    .split(',')
    .map((extra) => extra.trim().toLowerCase())
    .filter((extra) => extra !== '');
  return [name, ...extras.map((extra) => `${name}[${extra}]`)];
}

/** requirements.txt: one requirement a line; options (`-r`, `-e`, `--index-url`) and comments skipped. */
export function requirementsTxtNames(text: string): string[] {
  return text.split(/\r?\n/).flatMap((raw) => {
    const line = raw.replace(/(^|\s)#.*$/, '').trim();
    return line === '' || line.startsWith('-') ? [] : namesOfRequirement(line);
  });
}

/**
 * pyproject.toml and Pipfile are TOML; the parts read here are small and regular enough for a line
 * reader: PEP 621's `[project] dependencies = [...]` (strings, possibly over several lines), and the
 * keys of Poetry's `[tool.poetry.dependencies]` and Pipfile's `[packages]` tables.
 */
export function tomlDependencyNames(text: string): string[] {
  const names: string[] = [];
  let table = '';
  let inArray = false;
  for (const raw of text.split(/\r?\n/)) {
    const line = raw.replace(/\s#.*$/, '').trim();
    if (inArray) {
      names.push(...quotedStrings(line).flatMap(namesOfRequirement));
      if (withoutStrings(line).includes(']')) inArray = false;
      continue;
    }
    const header = /^\[\s*([^\]]+?)\s*\]$/.exec(line);
    if (header) {
      table = header[1]!;
      continue;
    }
    if (table === 'project') {
      const start = /^dependencies\s*=\s*\[(.*)$/.exec(line);
      if (start) {
        names.push(...quotedStrings(start[1]!).flatMap(namesOfRequirement));
        inArray = !withoutStrings(start[1]!).includes(']');
      }
    } else if (table === 'tool.poetry.dependencies' || table === 'packages') {
      const key = /^["']?([A-Za-z0-9][A-Za-z0-9._-]*)["']?\s*=/.exec(line);
      if (key && key[1]!.toLowerCase() !== 'python') names.push(normalizePackageName(key[1]!));
    }
  }
  return names;
}

function quotedStrings(line: string): string[] {
  return [...line.matchAll(/"([^"]*)"|'([^']*)'/g)].map((match) => match[1] ?? match[2] ?? '');
}

/** The line without its quoted strings, so a `]` inside `"fastapi[standard]"` does not end the array. */
function withoutStrings(line: string): string {
  return line.replace(/"[^"]*"|'[^']*'/g, '');
}
