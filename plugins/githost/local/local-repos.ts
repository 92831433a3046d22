import { mkdir, readdir, rename, rm, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { GitCommandError, NO_HOOKS, runGit } from '../git-process.ts';
import { GitRefNotFoundError, GitRepositoryNotFoundError, type GitBranch } from '../git-host.ts';

/**
 * The bare repositories of the local git server: `<root>/<organizationId>/<name>.git`. Every path
 * is built from an organisation id checked to be a UUID and a name checked against
 * REPO_NAME_PATTERN, so no input can reach outside the organisation's own folder.
 */

/** Lowercase letters, digits and dashes, 1–63 characters, starting with a letter or digit. */
export const REPO_NAME_PATTERN = /^[a-z0-9][a-z0-9-]{0,62}$/;
const ORGANIZATION_ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const COMMIT_ID = /^[0-9a-f]{40}$/;
/** What git itself accepts as a branch name, and no more than we need (no `..`, no leading dash). */
const BRANCH_NAME = /^(?!-)(?!.*\.\.)(?!.*\/\/)(?!.*\.lock$)[A-Za-z0-9._/-]{1,200}(?<![/.])$/;

export const isRepoName = (name: string): boolean => REPO_NAME_PATTERN.test(name);
export const isOrganizationId = (id: string): boolean => ORGANIZATION_ID.test(id);

/** How long one local git command (a ref listing, an archive) may take. */
const LOCAL_GIT_TIMEOUT_MS = 60_000;

export class LocalRepositories {
  constructor(private readonly root: string) {}

  /** The organisation's folder; throws on an id that is not a UUID (nothing else may name a folder). */
  organizationDir(organizationId: string): string {
    if (!isOrganizationId(organizationId)) throw new Error(`not an organisation id: ${JSON.stringify(organizationId)}`);
    return join(this.root, organizationId);
  }

  /** The bare repository's folder, whether it exists or not; null for a name that is not a repository name. */
  pathOf(organizationId: string, name: string): string | null {
    if (!isRepoName(name) || !isOrganizationId(organizationId)) return null;
    return join(this.root, organizationId, `${name}.git`);
  }

  async exists(organizationId: string, name: string): Promise<boolean> {
    const path = this.pathOf(organizationId, name);
    if (path === null) return false;
    return (await stat(join(path, 'HEAD')).catch(() => null))?.isFile() ?? false;
  }

  /** The path of an existing repository; GitRepositoryNotFoundError otherwise. */
  async require(organizationId: string, name: string): Promise<string> {
    if (!(await this.exists(organizationId, name))) throw new GitRepositoryNotFoundError(name);
    return this.pathOf(organizationId, name) as string;
  }

  /**
   * Creates an empty bare repository whose HEAD names `main`. Built in a temporary folder beside it
   * and renamed into place, so a half-made repository is never served; answers false when one of
   * that name exists already.
   */
  async create(organizationId: string, name: string): Promise<boolean> {
    const path = this.pathOf(organizationId, name);
    if (path === null) throw new Error(`not a repository name: ${JSON.stringify(name)}`);
    await mkdir(this.organizationDir(organizationId), { recursive: true, mode: 0o700 });
    if (await this.exists(organizationId, name)) return false;
    const building = `${path}.creating-${process.pid}-${Date.now()}`;
    try {
      await runGit([...NO_HOOKS, 'init', '--quiet', '--bare', '--initial-branch=main', building], { timeoutMs: LOCAL_GIT_TIMEOUT_MS, what: 'git init' });
      // Pushes over HTTP are this server's to allow (the key's scope), not git's default refusal.
      await runGit(['--git-dir', building, 'config', 'http.receivepack', 'true'], { timeoutMs: LOCAL_GIT_TIMEOUT_MS, what: 'git config' });
      await rename(building, path);
      return true;
    } catch (error) {
      await rm(building, { recursive: true, force: true });
      // Another create won the rename: the repository exists, which is the answer.
      if ((error as NodeJS.ErrnoException).code === 'ENOTEMPTY' || (error as NodeJS.ErrnoException).code === 'EEXIST') return false;
      throw error;
    }
  }

  /** The organisation's repository names, sorted. */
  async list(organizationId: string): Promise<string[]> {
    const entries = await readdir(this.organizationDir(organizationId), { withFileTypes: true }).catch((error: NodeJS.ErrnoException) => {
      if (error.code === 'ENOENT') return [];
      throw error;
    });
    const names: string[] = [];
    for (const entry of entries) {
      if (!entry.isDirectory() || !entry.name.endsWith('.git')) continue;
      const name = entry.name.slice(0, -'.git'.length);
      if (isRepoName(name) && (await this.exists(organizationId, name))) names.push(name);
    }
    return names.sort();
  }

  /** Every branch and the commit it points at (refs/heads only: tags deploy nothing). */
  async branches(organizationId: string, name: string): Promise<GitBranch[]> {
    const path = await this.require(organizationId, name);
    return readBranches(path);
  }

  /** The branch HEAD names, or null when HEAD names no existing branch (nothing pushed yet). */
  async defaultBranch(organizationId: string, name: string): Promise<string | null> {
    const path = await this.require(organizationId, name);
    const head = (await runGit(['--git-dir', path, 'symbolic-ref', '--quiet', 'HEAD'], { timeoutMs: LOCAL_GIT_TIMEOUT_MS, what: 'git symbolic-ref' }).catch(() => ''))
      .trim()
      .replace(/^refs\/heads\//, '');
    if (head === '') return null;
    const branches = await readBranches(path);
    if (branches.some((branch) => branch.name === head)) return head;
    // HEAD still names `main` but the first push brought another branch: that one is the default.
    return branches[0]?.name ?? null;
  }

  /** Resolves a branch name or a full commit id to the commit; GitRefNotFoundError when there is none. */
  async resolve(organizationId: string, name: string, ref: string): Promise<string> {
    const path = await this.require(organizationId, name);
    let spec: string;
    if (COMMIT_ID.test(ref)) spec = `${ref}^{commit}`;
    else if (BRANCH_NAME.test(ref)) spec = `refs/heads/${ref}^{commit}`;
    else throw new GitRefNotFoundError(name, ref);
    try {
      const out = await runGit(['--git-dir', path, 'rev-parse', '--verify', '--quiet', '--end-of-options', spec], { timeoutMs: LOCAL_GIT_TIMEOUT_MS, what: 'git rev-parse' });
      return out.trim();
    } catch (error) {
      if (error instanceof GitCommandError && error.reason === 'exit') throw new GitRefNotFoundError(name, ref);
      throw error;
    }
  }

  /** Removes every repository of the organisation (its erasure). Answers how many went. */
  async eraseOrganization(organizationId: string): Promise<number> {
    const count = (await this.list(organizationId)).length;
    await rm(this.organizationDir(organizationId), { recursive: true, force: true });
    return count;
  }
}

/** refs/heads/* of a bare repository, by name. */
export async function readBranches(gitDir: string): Promise<GitBranch[]> {
  const out = await runGit(['--git-dir', gitDir, 'for-each-ref', '--format=%(objectname) %(refname)', 'refs/heads/'], {
    timeoutMs: LOCAL_GIT_TIMEOUT_MS,
    what: 'git for-each-ref',
  });
  const branches: GitBranch[] = [];
  for (const line of out.split('\n')) {
    const match = /^([0-9a-f]{40}) refs\/heads\/(.+)$/.exec(line);
    if (match) branches.push({ name: match[2] as string, commit: match[1] as string });
  }
  return branches.sort((a, b) => a.name.localeCompare(b.name));
}

export interface BranchChange {
  branch: string;
  before: string | null;
  after: string | null;
}

/** What moved between two listings of a repository's branches. */
export function branchChanges(before: readonly GitBranch[], after: readonly GitBranch[]): BranchChange[] {
  const was = new Map(before.map((branch) => [branch.name, branch.commit]));
  const now = new Map(after.map((branch) => [branch.name, branch.commit]));
  const changes: BranchChange[] = [];
  for (const name of new Set([...was.keys(), ...now.keys()])) {
    const previous = was.get(name) ?? null;
    const current = now.get(name) ?? null;
    if (previous !== current) changes.push({ branch: name, before: previous, after: current });
  }
  return changes.sort((a, b) => a.branch.localeCompare(b.branch));
}
