import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { SourceTree } from '../../../../plugins/apps/build-decision/index.ts';
import type { Runtime } from '../../../../plugins/apps/build-decision/types.ts';

/** The fixture repositories, one folder each (test/fixtures/apps/<name>). */
export const FIXTURES = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../../fixtures/apps');

export const fixture = (name: string) => SourceTree.open(path.join(FIXTURES, name));

/** Every runtime but bun: what a machine with node, python and go has. */
export const AVAILABLE: readonly Runtime[] = ['node', 'python', 'go', 'static'];

/** A repository written for one test (files by relative path), removed at teardown. */
export function scratchRepository(t: { teardown(fn: () => void): void }, files: Record<string, string>): string {
  const root = mkdtempSync(path.join(tmpdir(), 'build-decision-'));
  t.teardown(() => rmSync(root, { recursive: true, force: true }));
  for (const [file, text] of Object.entries(files)) {
    mkdirSync(path.dirname(path.join(root, file)), { recursive: true });
    writeFileSync(path.join(root, file), text);
  }
  return root;
}
