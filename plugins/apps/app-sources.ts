import { createHash } from 'node:crypto';
import { cp, mkdir, mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { ApiError } from '../../core/kernel/errors.ts';
import { CloneRefusedError } from '../githost/clone.ts';
import type { CloneFromUrl, GitHost, ListRemoteBranches } from '../githost/git-host.ts';
import { GitCommandError } from '../githost/git-process.ts';
import { type BuildDecision, decideBuild, SourceTree } from './build-decision/index.ts';
import { checkoutOrRefuse } from './source-checkout.ts';
import './deploy-errors.ts';

/**
 * Where an app's files come from, for its three source kinds:
 * - `githost`: a repository of the organisation's git host (its port's checkout);
 * - `url`: an http(s) repository elsewhere, cloned through the githost plugin's guarded clone
 *   (SSRF guard, size cap, timeout, no credential in the URL) every time it is deployed;
 * - `template`: a folder of this repository (`templates/apps/<id>`), copied: it deploys offline.
 */
export type AppSource = { kind: 'githost'; repo: string; branch: string } | { kind: 'url'; url: string; branch: string } | { kind: 'template'; template: string };

export interface SourceDeps {
  git: GitHost;
  clone: CloneFromUrl;
  remoteBranches: ListRemoteBranches;
}

/** The templates kept in this repository, each a folder of templates/apps. */
export const TEMPLATES_DIR = fileURLToPath(new URL('../../templates/apps/', import.meta.url));
/** Files every template's app gets too (templates/apps/_shared), copied into its folder. */
const TEMPLATES_SHARED_DIR = path.join(TEMPLATES_DIR, '_shared');
export const TEMPLATE_IDS = ['workflow-automation', 'chat-ui'] as const;
export type TemplateId = (typeof TEMPLATE_IDS)[number];

/** The source of a stored app (its kind's columns). */
export function sourceOf(app: { sourceKind: string; sourceRepo: string | null; sourceUrl: string | null; branch: string }): AppSource {
  if (app.sourceKind === 'url') return { kind: 'url', url: app.sourceUrl ?? '', branch: app.branch };
  if (app.sourceKind === 'template') return { kind: 'template', template: app.sourceRepo ?? '' };
  return { kind: 'githost', repo: app.sourceRepo ?? '', branch: app.branch };
}

/**
 * Writes the source's files into `into` and answers the revision written: the commit for git
 * sources (`ref` a commit of a githost repository, else the branch's head), `template:<sha256>` of
 * the template's files for a template. Refusals are the API's 400s (a URL the guard refuses, a
 * clone that failed, a branch that is not there).
 */
export async function checkoutSource(
  deps: SourceDeps,
  organizationId: string,
  source: AppSource,
  into: string,
  options: { ref?: string | null; signal?: AbortSignal } = {},
): Promise<{ commit: string }> {
  if (source.kind === 'githost') {
    const request = { repo: source.repo, ref: options.ref ?? source.branch, into, ...(options.signal ? { signal: options.signal } : {}) };
    return checkoutOrRefuse(deps.git, organizationId, request);
  }
  if (source.kind === 'url') {
    try {
      return await deps.clone({ url: source.url, branch: source.branch, into, ...(options.signal ? { signal: options.signal } : {}) });
    } catch (error) {
      throw urlRefusal(error, source.url);
    }
  }
  const folder = templateFolder(source.template);
  await mkdir(into, { recursive: true, mode: 0o700 });
  await cp(folder, into, { recursive: true });
  // What the templates share (their client for the service, HTTP helpers), beside each one's own files.
  await cp(TEMPLATES_SHARED_DIR, into, { recursive: true });
  return { commit: `template:${await treeHash(into)}` };
}

/** The 400 a URL source gets when it cannot be read; anything else is thrown on. */
export function urlRefusal(error: unknown, url: string): unknown {
  if (error instanceof CloneRefusedError) return new ApiError('git_url_refused', error.message, { param: 'gitUrl' });
  if (error instanceof GitCommandError) {
    return new ApiError('git_clone_failed', `Cloning ${originOf(url)} failed: ${error.message}`, { param: 'gitUrl' });
  }
  return error;
}

/** Reads the source in a temporary folder and decides its build: refusals are the deploy rules' 400s. */
export async function decideFromSource(
  deps: SourceDeps,
  organizationId: string,
  source: AppSource,
  request: { rootDir?: string | undefined; startCommand?: string | undefined },
): Promise<{ commit: string; decision: BuildDecision }> {
  return withSourceTree(deps, organizationId, source, async (tree, commit) => {
    const result = await decideBuild(tree, {
      ...(request.rootDir !== undefined ? { rootDir: request.rootDir } : {}),
      overrides: request.startCommand !== undefined ? { startCommand: request.startCommand } : {},
    });
    if (!result.ok) throw result.error;
    return { commit, decision: result.decision };
  });
}

/** Checks the source out into a temporary folder, hands its tree to `read`, and removes the folder. */
export async function withSourceTree<T>(deps: SourceDeps, organizationId: string, source: AppSource, read: (tree: SourceTree, commit: string, dir: string) => Promise<T>): Promise<T> {
  const into = await mkdtemp(path.join(tmpdir(), 'svc-apps-source-'));
  try {
    const { commit } = await checkoutSource(deps, organizationId, source, into);
    return await read(await SourceTree.open(into), commit, into);
  } finally {
    await rm(into, { recursive: true, force: true });
  }
}

function templateFolder(template: string): string {
  if (!(TEMPLATE_IDS as readonly string[]).includes(template)) throw new ApiError('template_not_found', `No template ${template}`, { param: 'template' });
  return path.join(TEMPLATES_DIR, template);
}

/** A stable hash of a folder's files (names and contents): a template's revision. */
async function treeHash(dir: string): Promise<string> {
  const hash = createHash('sha256');
  const walk = async (relative: string): Promise<void> => {
    const entries = (await readdir(path.join(dir, relative), { withFileTypes: true })).sort((a, b) => (a.name < b.name ? -1 : 1));
    for (const entry of entries) {
      const name = path.posix.join(relative, entry.name);
      if (entry.isDirectory()) await walk(name);
      else if (entry.isFile())
        hash
          .update(`${name}\0`)
          .update(await readFile(path.join(dir, name)))
          .update('\0');
    }
  };
  await walk('');
  return hash.digest('hex').slice(0, 40);
}

function originOf(raw: string): string {
  try {
    return new URL(raw).origin;
  } catch {
    return 'the URL';
  }
}
