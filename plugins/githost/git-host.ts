import { createToken } from '../../core/kernel/container.ts';
import { defineContributionPoint } from '../../core/kernel/extension-points.ts';
import type { Queryable } from '../../core/ports/database.ts';
import type { CloneRequest, CloneResult, RemoteBranches } from './clone.ts';

/**
 * The git host port: what the apps plugin asks of wherever an organisation's code lives. The
 * `local` provider (plugins/githost/local/) keeps bare repositories on this machine's disk and
 * serves them over smart HTTP; the `github` provider (plugins/githost/github/, GitHub App
 * installations held by the organisation) implements the same interface, its repositories named
 * `owner/name` where the local ones are plain names. Both are seen through the organisation's
 * repository allow-list (allow-list.ts). Pushes reach the apps plugin as `githost.pushed` domain events
 * (githost-events.ts), whichever provider saw them.
 */
export interface GitHost {
  /** Which provider this is, as `GET /client/githost/status` reports it. */
  readonly provider: GitHostProvider;
  /** Whether the organisation can use the host now, and where its repositories are reached. */
  status(organizationId: string): Promise<GitHostStatus>;
  /** The organisation's repositories, by name. */
  listRepos(organizationId: string): Promise<GitRepository[]>;
  /** A repository's branches; throws GitRepositoryNotFoundError when the organisation has no such repository. */
  listBranches(organizationId: string, repo: string): Promise<GitBranch[]>;
  /**
   * Writes the files of `ref` (a branch name or a full 40-hex commit) of a repository into `into`
   * (an empty or absent directory) and answers the commit it wrote. Throws
   * GitRepositoryNotFoundError or GitRefNotFoundError, or a GitCommandError when git fails.
   */
  checkout(organizationId: string, request: CheckoutRequest): Promise<CheckoutResult>;
}

export type GitHostProvider = 'local' | 'github';

export interface GitHostStatus {
  provider: GitHostProvider;
  /** Local: always (the server is this service). GitHub: an installation is connected. */
  connected: boolean;
  /** Local: the base URL a repository's clone URL starts with (`<base>/<org>/<name>.git`); null where none applies. */
  baseUrl: string | null;
}

export interface GitRepository {
  /** Local: `[a-z0-9-]`, 1–63 characters. GitHub: `owner/name`. */
  name: string;
  /** What `git clone` takes (no credential in it). */
  cloneUrl: string;
  /** The branch HEAD names, or null in a repository nothing was pushed to yet. */
  defaultBranch: string | null;
  /** False until the first push. */
  empty: boolean;
}

export interface GitBranch {
  name: string;
  /** The commit the branch points at (40 hex). */
  commit: string;
}

export interface CheckoutRequest {
  repo: string;
  /** A branch name or a full commit id. */
  ref: string;
  /** Directory to write the files into; created when absent. */
  into: string;
  signal?: AbortSignal;
}

export interface CheckoutResult {
  commit: string;
}

export class GitRepositoryNotFoundError extends Error {
  constructor(readonly repo: string) {
    super(`No repository ${JSON.stringify(repo)} in this organisation`);
    this.name = 'GitRepositoryNotFoundError';
  }
}

export class GitRefNotFoundError extends Error {
  constructor(
    readonly repo: string,
    readonly ref: string,
  ) {
    super(`Repository ${JSON.stringify(repo)} has no branch or commit ${JSON.stringify(ref)}`);
    this.name = 'GitRefNotFoundError';
  }
}

/**
 * Clones from an http(s) URL (clone.ts) with the plugin's `clone` limits and the service's
 * `outbound.allowPrivateNetwork` already applied.
 */
export type CloneFromUrl = (request: Omit<CloneRequest, 'maxBytes' | 'timeoutMs' | 'policy'>) => Promise<CloneResult>;

/** The branches at an http(s) URL (clone.ts `listRemoteBranches`) with the plugin's clone timeout and policy applied. */
export type ListRemoteBranches = (url: string) => Promise<RemoteBranches>;

/** The container tokens of the git host, for the plugins that depend on `githost`. */
export const GitHostTokens = {
  Host: createToken<GitHost>('githost.Host'),
  Clone: createToken<CloneFromUrl>('githost.Clone'),
  RemoteBranches: createToken<ListRemoteBranches>('githost.RemoteBranches'),
};

/** Something of the organisation deployed from a repository of the git host (an app). */
export interface GitHostRepoUse {
  repo: string;
  /** What uses it, for a message: `app hello`. */
  usedBy: string;
}

/**
 * Plugins that deploy from the git host tell which repositories their records use, so the allow-list
 * is not narrowed under them (PUT /githost/repo-allow-list answers 409 naming what would be cut off).
 */
export interface GitHostRepoUsers {
  readonly name: string;
  /** Read in `db`, the allow-list change's transaction. */
  reposInUse(db: Queryable, organizationId: string): Promise<GitHostRepoUse[]>;
}

export const GitHostRepoUsersPoint = defineContributionPoint<GitHostRepoUsers>('githost.repo-users');
