import type { CheckoutRequest, CheckoutResult, CloneFromUrl, GitBranch, GitHost, GitHostStatus, GitRepository } from '../git-host.ts';
import { GitRefNotFoundError, GitRepositoryNotFoundError } from '../git-host.ts';
import { GitCommandError } from '../git-process.ts';
import type { GitHostStore, Installation } from '../githost-store.ts';
import type { GitHubApi, GitHubRepo } from './github-api.ts';

/** `owner/name` as GitHub spells account and repository names. */
export const GITHUB_REPO_NAME = /^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})\/[A-Za-z0-9._-]{1,100}$/;
/** A GitHub user or organisation login. */
export const GITHUB_LOGIN = /^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})$/;
const COMMIT_ID = /^[0-9a-f]{40}$/;

export const ownerOf = (repo: string): string => repo.split('/')[0] ?? '';

/**
 * The git host port over the GitHub App installations an organisation holds (githost_installations):
 * its repositories are those the installations may read, named `owner/name`; `checkout` clones with an
 * installation token given to git as an `Authorization` header (clone.ts), never in the URL.
 */
export class GitHubGitHost implements GitHost {
  readonly provider = 'github' as const;

  constructor(
    private readonly api: GitHubApi,
    private readonly store: GitHostStore,
    private readonly clone: CloneFromUrl,
  ) {}

  async status(organizationId: string): Promise<GitHostStatus> {
    return { provider: 'github', connected: (await this.store.installations(organizationId)).length > 0, baseUrl: null };
  }

  async listRepos(organizationId: string): Promise<GitRepository[]> {
    const byName = new Map<string, GitRepository>();
    for (const installation of await this.store.installations(organizationId)) {
      for (const repo of await this.api.installationRepos(installation.installationId)) {
        byName.set(repo.fullName, { name: repo.fullName, cloneUrl: repo.cloneUrl, defaultBranch: repo.defaultBranch, empty: repo.empty });
      }
    }
    return [...byName.values()].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  }

  async listBranches(organizationId: string, repo: string): Promise<GitBranch[]> {
    const { installation } = await this.find(organizationId, repo);
    const branches = await this.api.branches(installation.installationId, repo);
    if (branches === null) throw new GitRepositoryNotFoundError(repo);
    return branches;
  }

  async checkout(organizationId: string, request: CheckoutRequest): Promise<CheckoutResult> {
    const { installation, repo } = await this.find(organizationId, request.repo);
    const isCommit = COMMIT_ID.test(request.ref);
    if (!isCommit) {
      const branches = await this.api.branches(installation.installationId, repo.fullName);
      if (branches === null) throw new GitRepositoryNotFoundError(request.repo);
      if (!branches.some((branch) => branch.name === request.ref)) throw new GitRefNotFoundError(request.repo, request.ref);
    }
    const token = await this.api.installationToken(installation.installationId);
    const authorization = `Basic ${Buffer.from(`x-access-token:${token}`).toString('base64')}`;
    try {
      return await this.clone({
        url: repo.cloneUrl,
        authorization,
        into: request.into,
        ...(isCommit ? { commit: request.ref } : { branch: request.ref }),
        ...(request.signal ? { signal: request.signal } : {}),
      });
    } catch (error) {
      // A commit the repository does not have: git's fetch fails for it.
      if (isCommit && error instanceof GitCommandError && error.reason === 'exit') throw new GitRefNotFoundError(request.repo, request.ref);
      throw error;
    }
  }

  /** The installation of the organisation that reads the repository, and the repository as it lists it. */
  private async find(organizationId: string, name: string): Promise<{ installation: Installation; repo: GitHubRepo }> {
    if (!GITHUB_REPO_NAME.test(name)) throw new GitRepositoryNotFoundError(name);
    const installations = await this.store.installations(organizationId);
    const owner = ownerOf(name).toLowerCase();
    // The installation on the repository's owner first: it is the one that reads it, unless none is held.
    installations.sort((a, b) => Number(b.accountLogin.toLowerCase() === owner) - Number(a.accountLogin.toLowerCase() === owner));
    for (const installation of installations) {
      const repo = (await this.api.installationRepos(installation.installationId)).find((r) => r.fullName.toLowerCase() === name.toLowerCase());
      if (repo) return { installation, repo };
    }
    throw new GitRepositoryNotFoundError(name);
  }
}
