import { BuildDecisionError } from './build-errors.ts';
import { type Detector, hasMarker } from './detection.ts';
import { normalizeRelative, type SourceTree } from './source-tree.ts';

/**
 * Which folder of a repository is the app: the caller's `rootDir`, checked, or, when the top builds
 * nothing, the folders that would build on their own (a monorepo's apps), found by their manifests.
 */
export type RootDirCheck = { readonly ok: true; readonly rootDir: string } | { readonly ok: false; readonly error: BuildDecisionError };

/** `rootDir` as a folder of the tree (`''` for the top), or root_dir_not_found saying why. */
export async function checkRootDir(tree: SourceTree, requested: string): Promise<RootDirCheck> {
  const normal = normalizeRelative(requested);
  if (normal === null) {
    const message = `rootDir ${JSON.stringify(requested)} is not a folder inside the repository: give a path relative to its top, without "..", like "apps/web"`;
    return { ok: false, error: new BuildDecisionError('root_dir_not_found', message, 'rootDir') };
  }
  if (normal !== '' && !(await tree.isDirectory(normal))) {
    const message = `rootDir ${JSON.stringify(requested)} names no folder of the repository: check the spelling and case, relative to the repository's top`;
    return { ok: false, error: new BuildDecisionError('root_dir_not_found', message, 'rootDir') };
  }
  return { ok: true, rootDir: normal };
}

/**
 * Folders never searched for apps: dependencies, build output and virtual environments hold
 * manifests that are not apps (every package in node_modules has a package.json). Folders whose name
 * starts with a dot (.git, .github, .next) are skipped too.
 */
const SKIPPED = new Set(['node_modules', 'vendor', 'dist', 'build', 'venv', '__pycache__']);

export interface CandidateSearch {
  /** Folder levels below the top searched (1: its direct subfolders). */
  readonly maxDepth: number;
  /** Folders looked into at most: a repository is someone else's input. */
  readonly maxFolders: number;
}

export const DEFAULT_CANDIDATE_SEARCH: CandidateSearch = { maxDepth: 3, maxFolders: 500 };

/**
 * The folders under the top that some provider recognises, breadth first and sorted, not looking
 * inside one found (an app's own subfolders, its `public/index.html`, are part of it).
 */
export async function findCandidates(tree: SourceTree, detectors: readonly Detector[], search: CandidateSearch = DEFAULT_CANDIDATE_SEARCH): Promise<string[]> {
  const found: string[] = [];
  let level = [''];
  let visited = 0;
  for (let depth = 1; depth <= search.maxDepth && level.length > 0; depth++) {
    const next: string[] = [];
    for (const parent of level) {
      for (const entry of await tree.list(parent)) {
        if (entry.kind !== 'dir' || entry.name.startsWith('.') || SKIPPED.has(entry.name)) continue;
        if (++visited > search.maxFolders) return found.sort();
        const folder = parent === '' ? entry.name : `${parent}/${entry.name}`;
        const sub = tree.subtree(folder);
        if (await recognised(sub, detectors)) found.push(folder);
        else next.push(folder);
      }
    }
    level = next;
  }
  return found.sort();
}

async function recognised(tree: SourceTree, detectors: readonly Detector[]): Promise<boolean> {
  for (const detector of detectors) if (await hasMarker(tree, detector.markers)) return true;
  return false;
}
