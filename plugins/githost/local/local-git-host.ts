import { mkdir, readdir } from 'node:fs/promises';
import { NO_HOOKS, runGit } from '../git-process.ts';
import type { CheckoutRequest, CheckoutResult, GitBranch, GitHost, GitHostStatus, GitRepository } from '../git-host.ts';
import type { LocalRepositories } from './local-repos.ts';

const CHECKOUT_TIMEOUT_MS = 120_000;

/** The git host port over this machine's bare repositories (local-repos.ts), served at `<baseUrl>/<org>/<name>.git`. */
export class LocalGitHost implements GitHost {
  readonly provider = 'local' as const;

  constructor(
    private readonly repos: LocalRepositories,
    /** `http://host:port/git`, without a trailing slash. */
    private readonly baseUrl: string,
  ) {}

  cloneUrl(organizationId: string, name: string): string {
    return `${this.baseUrl}/${organizationId}/${name}.git`;
  }

  async status(_organizationId: string): Promise<GitHostStatus> {
    return { provider: 'local', connected: true, baseUrl: this.baseUrl };
  }

  async listRepos(organizationId: string): Promise<GitRepository[]> {
    const names = await this.repos.list(organizationId);
    const repositories: GitRepository[] = [];
    for (const name of names) repositories.push(await this.describe(organizationId, name));
    return repositories;
  }

  async describe(organizationId: string, name: string): Promise<GitRepository> {
    const defaultBranch = await this.repos.defaultBranch(organizationId, name);
    return { name, cloneUrl: this.cloneUrl(organizationId, name), defaultBranch, empty: defaultBranch === null };
  }

  listBranches(organizationId: string, repo: string): Promise<GitBranch[]> {
    return this.repos.branches(organizationId, repo);
  }

  /**
   * A clone of the bare repository (a local clone: hard links, no network), then the commit checked
   * out detached. The target must be empty: a build never lands on top of another's files.
   */
  async checkout(organizationId: string, request: CheckoutRequest): Promise<CheckoutResult> {
    const commit = await this.repos.resolve(organizationId, request.repo, request.ref);
    const source = await this.repos.require(organizationId, request.repo);
    await mkdir(request.into, { recursive: true, mode: 0o700 });
    if ((await readdir(request.into)).length > 0) throw new Error(`checkout target ${request.into} is not empty`);
    const options = { timeoutMs: CHECKOUT_TIMEOUT_MS, ...(request.signal ? { signal: request.signal } : {}) };
    await runGit([...NO_HOOKS, 'clone', '--quiet', '--no-checkout', '--', source, request.into], { ...options, what: 'git clone' });
    await runGit([...NO_HOOKS, '-C', request.into, '-c', 'advice.detachedHead=false', 'checkout', '--quiet', '--detach', commit], { ...options, what: 'git checkout' });
    return { commit };
  }
}
