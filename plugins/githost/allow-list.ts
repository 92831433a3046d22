import type { CheckoutRequest, CheckoutResult, GitBranch, GitHost, GitHostStatus, GitRepository } from './git-host.ts';
import { GitRepositoryNotFoundError } from './git-host.ts';
import type { GitHostSettings, GitHostStore } from './githost-store.ts';

/** The account (user or organisation) part of a repository name; '' for the local server's plain names. */
export function repoOwner(repo: string): string {
  const slash = repo.indexOf('/');
  return slash < 0 ? '' : repo.slice(0, slash);
}

/**
 * Whether the organisation's repository allow-list lets a repository through. Names compare without
 * case (GitHub's are case-insensitive; the local server's are lowercase). Unrestricted: every one.
 */
export function allowedBy(settings: Pick<GitHostSettings, 'restricted' | 'mode' | 'repos' | 'orgs'>, repo: string): boolean {
  if (!settings.restricted) return true;
  const name = repo.toLowerCase();
  if (settings.mode === 'repos') return settings.repos.some((allowed) => allowed.toLowerCase() === name);
  const owner = repoOwner(name);
  return owner !== '' && settings.orgs.some((allowed) => allowed.toLowerCase() === owner);
}

/**
 * The git host as everything outside the plugin sees it (GitHostTokens.Host): the provider behind the
 * organisation's repository allow-list. While it is restricted, a repository outside it is not listed,
 * and its branches and checkouts answer GitRepositoryNotFoundError, which every route turns into the
 * same 404 as a repository that does not exist: it cannot be chosen, browsed or deployed by anyone.
 */
export class AllowListedGitHost implements GitHost {
  constructor(
    /** The provider itself: what the allow-list routes check names against (every repository it can see). */
    readonly inner: GitHost,
    private readonly store: GitHostStore,
  ) {}

  get provider() {
    return this.inner.provider;
  }

  status(organizationId: string): Promise<GitHostStatus> {
    return this.inner.status(organizationId);
  }

  async listRepos(organizationId: string): Promise<GitRepository[]> {
    const [settings, repos] = await Promise.all([this.store.settings(organizationId), this.inner.listRepos(organizationId)]);
    return repos.filter((repo) => allowedBy(settings, repo.name));
  }

  async listBranches(organizationId: string, repo: string): Promise<GitBranch[]> {
    await this.require(organizationId, repo);
    return this.inner.listBranches(organizationId, repo);
  }

  async checkout(organizationId: string, request: CheckoutRequest): Promise<CheckoutResult> {
    await this.require(organizationId, request.repo);
    return this.inner.checkout(organizationId, request);
  }

  private async require(organizationId: string, repo: string): Promise<void> {
    if (!allowedBy(await this.store.settings(organizationId), repo)) throw new GitRepositoryNotFoundError(repo);
  }
}
