import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import t from 'tap';

/**
 * PostgreSQL's SQLSTATEs are read in adapters/ only (adapters/sql/database-errors.ts turns them
 * into core/ports/database.ts's typed errors). A five-character SQLSTATE literal, or a test of a
 * SQLSTATE class prefix, anywhere else means code depends on the driver again.
 */
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const FOLDERS = ['core', 'plugins', 'providers', 'composition'];
// Classes 0x-5x (23505, 40001, 08006, 42P01, 57P01…) and the letter classes PostgreSQL uses.
const SQLSTATE_LITERAL = /(['"`])(?:[0-5][0-9A-Z]|F0|HV|P0|XX)[0-9A-Z]{3}\1/;
const SQLSTATE_CLASS = /startsWith\(\s*(['"`])(?:[0-5][0-9A-Z]|F0|HV|P0|XX)\1\s*\)/;

function sources(dir: string): string[] {
  let entries: import('node:fs').Dirent[];
  try {
    entries = readdirSync(dir, { withFileTypes: true });
  } catch {
    return [];
  }
  return entries.flatMap((entry) => {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) return entry.name === 'node_modules' ? [] : sources(full);
    return entry.name.endsWith('.ts') ? [full] : [];
  });
}

t.test('no SQLSTATE outside adapters/', async (t) => {
  const offenders: string[] = [];
  const files = FOLDERS.flatMap((folder) => sources(path.join(root, folder)));
  t.ok(files.length > 50, 'the sources were found');
  for (const file of files) {
    readFileSync(file, 'utf8')
      .split('\n')
      .forEach((line, index) => {
        if (SQLSTATE_LITERAL.test(line) || SQLSTATE_CLASS.test(line)) offenders.push(`${path.relative(root, file)}:${index + 1}: ${line.trim()}`);
      });
  }
  t.same(offenders, [], 'match the typed errors of core/ports/database.ts instead (UniqueViolation, DatabaseUnavailable…)');
});

t.test('the pattern catches what it is meant to', async (t) => {
  for (const line of ["code === '23505'", 'code === "40P01"', "code.startsWith('08')", "new Set(['57P01'])", "'42P06'"]) {
    t.ok(SQLSTATE_LITERAL.test(line) || SQLSTATE_CLASS.test(line), line);
  }
  for (const line of ["'ENOENT'", "'invalid_json'", "'50256x'", 'const n = 23505;']) {
    t.notOk(SQLSTATE_LITERAL.test(line) || SQLSTATE_CLASS.test(line), line);
  }
});
