import type { SourceTree } from './source-tree.ts';
import type { Chosen, Provider, Runtime } from './types.ts';

/**
 * What one provider reads in a folder it recognises. `start` is null when the provider cannot tell
 * how to start the app (`startHint` then says why, for no_start_command's message); a Procfile or
 * the caller may still supply it.
 */
export interface Detection {
  readonly provider: Provider;
  readonly runtime: Chosen & { readonly value: Runtime };
  readonly framework: Chosen;
  readonly install: Chosen;
  readonly build: Chosen;
  readonly start: Chosen | null;
  /** Set with a `start` that runs no command: the folder the static file server serves (types.ts). */
  readonly staticRoot?: Chosen;
  readonly startHint?: string;
  /** Lockfiles of more than one package manager, when the provider cannot pick among them. */
  readonly conflictingLockfiles?: readonly string[];
  /** package.json's scripts, for checking `npm run x` in a start command; null without a readable package.json. */
  readonly scripts: Readonly<Record<string, string>> | null;
}

export interface Detector {
  readonly provider: Provider;
  /** The files whose presence at a folder's top makes it this provider's: enough to list monorepo candidates. */
  readonly markers: readonly string[];
  detect(tree: SourceTree): Promise<Detection | null>;
}

export const chosen = (value: string | null, rule: string, ...evidence: string[]): Chosen => ({ value, rule, evidence });

/** Whether any of the provider's marker files is at the top of the folder. */
export async function hasMarker(tree: SourceTree, markers: readonly string[]): Promise<boolean> {
  for (const marker of markers) if (await tree.isFile(marker)) return true;
  return false;
}

/** The first of `files` that exists, or null. */
export async function firstFile(tree: SourceTree, files: readonly string[]): Promise<string | null> {
  for (const file of files) if (await tree.isFile(file)) return file;
  return null;
}
