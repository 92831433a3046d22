import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { ApiError } from '../../core/kernel/errors.ts';
import { type GitHost, GitRefNotFoundError, GitRepositoryNotFoundError } from '../githost/git-host.ts';
import { type BuildDecision, decideBuild, SourceTree } from './build-decision/index.ts';

export interface CheckoutAndDecide {
  repo: string;
  branch: string;
  rootDir?: string | undefined;
  startCommand?: string | undefined;
}

/**
 * Reads a branch of a repository of the git host and decides its build: what the deploy routes and
 * the build check do before anything is created. Refusals are the 400s of the deploy rules (the
 * build decision's codes), a repository or branch that is not there 400 with `param`.
 */
export async function decideFromGitHost(host: GitHost, organizationId: string, request: CheckoutAndDecide): Promise<{ commit: string; decision: BuildDecision }> {
  const into = await mkdtemp(path.join(tmpdir(), 'svc-apps-check-'));
  try {
    const { commit } = await checkoutOrRefuse(host, organizationId, { repo: request.repo, ref: request.branch, into });
    const result = await decideBuild(await SourceTree.open(into), {
      ...(request.rootDir !== undefined ? { rootDir: request.rootDir } : {}),
      overrides: request.startCommand !== undefined ? { startCommand: request.startCommand } : {},
    });
    if (!result.ok) throw result.error;
    return { commit, decision: result.decision };
  } finally {
    await rm(into, { recursive: true, force: true });
  }
}

/** A checkout, its refusals told as the API's 400s (the repository named in `repo`, the branch in `branch`). */
export async function checkoutOrRefuse(host: GitHost, organizationId: string, request: { repo: string; ref: string; into: string }): Promise<{ commit: string }> {
  try {
    return await host.checkout(organizationId, request);
  } catch (error) {
    if (error instanceof GitRepositoryNotFoundError) {
      throw new ApiError('git_repository_not_found', `The organisation has no git repository named ${request.repo}`, { param: 'repo' });
    }
    if (error instanceof GitRefNotFoundError) {
      const empty = (await host.listBranches(organizationId, request.repo).catch(() => [])).length === 0;
      if (empty) throw new ApiError('git_repository_empty', `Nothing has been pushed to ${request.repo} yet: push a branch first`, { param: 'repo' });
      throw new ApiError('git_branch_not_found', `${request.repo} has no branch ${request.ref}`, { param: 'branch' });
    }
    throw error;
  }
}
