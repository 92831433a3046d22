/**
 * The build decision's shapes: what routes, deploys and the build-check answer will carry. Each
 * decided field says what was chosen (`value`), by which rule (`rule`, a stable name listed in this
 * folder's README) and from what it was read (`evidence`, short facts naming files and fields).
 */

/** The providers that can recognise an app, in the order they are asked. */
export const PROVIDERS = ['node', 'python', 'go', 'static'] as const;
export type Provider = (typeof PROVIDERS)[number];

/** What runs the app. `static` needs no interpreter: the hosting runtime serves the files. */
export type Runtime = 'node' | 'bun' | 'python' | 'go' | 'static';

export interface Chosen {
  /** The command, name or folder chosen; null when there is none to run (no build step). */
  readonly value: string | null;
  readonly rule: string;
  readonly evidence: readonly string[];
}

export interface BuildDecision {
  /** The folder built, relative to the repository's top (`.` for the top itself). */
  readonly rootDir: Chosen;
  /** The provider that decided; the others that also recognised the folder are in `alsoMatched`. */
  readonly provider: Provider;
  readonly runtime: Chosen;
  readonly framework: Chosen;
  readonly install: Chosen;
  readonly build: Chosen;
  readonly start: Chosen;
  /**
   * The folder the hosting runtime's static file server serves, relative to rootDir (`.`: the files
   * as committed; `dist`: what a Vite build writes); null when the app runs a command of its own.
   */
  readonly staticRoot: Chosen | null;
  readonly alsoMatched: readonly Provider[];
  /** Variable names the committed example env file asks for; `[]` when the folder has none. */
  readonly envKeys: readonly string[];
  /** The example env file read, or null. */
  readonly envFile: string | null;
}

/** Commands the caller sets, which come before anything read from the repository. */
export interface BuildOverrides {
  readonly startCommand?: string;
  readonly buildCommand?: string;
  readonly installCommand?: string;
}
