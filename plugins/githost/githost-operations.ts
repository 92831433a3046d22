import { z } from 'zod';
import { ApiError } from '../../core/kernel/errors.ts';
import { defineOperation, type AnyOperation } from '../../core/operations/operations.ts';
import { GitRepositoryNotFoundError, type GitHost } from './git-host.ts';
import type { LocalGitHost } from './local/local-git-host.ts';
import { REPO_NAME_PATTERN } from './local/local-repos.ts';
import type { LocalRepositories } from './local/local-repos.ts';
// Catalogues the codes this module answers with (core/kernel/error-catalogue.ts).
import './githost-errors.ts';

const statusView = z
  .object({
    object: z.literal('githost_status'),
    provider: z.enum(['local', 'github']).describe('Where the organisation’s repositories live'),
    connected: z.boolean().describe('Whether apps can be deployed from it now (the local git server always is)'),
    baseUrl: z.string().nullable().describe('Local: clone URLs are <baseUrl>/<organisation id>/<name>.git'),
  })
  .meta({ id: 'GitHostStatus', description: 'The git host apps are deployed from' });

const repositoryView = z
  .object({
    object: z.literal('git_repository'),
    name: z.string().describe('The repository’s name'),
    cloneUrl: z.string().describe('What git clone and git remote add take; authenticate with an API key as the password'),
    defaultBranch: z.string().nullable().describe('The branch HEAD names; null until the first push'),
    empty: z.boolean().describe('True until the first push'),
  })
  .meta({ id: 'GitRepository', description: 'A git repository of the organisation' });

const repositoryListView = z
  .object({ object: z.literal('list'), data: z.array(repositoryView).describe('By name') })
  .meta({ id: 'GitRepositoryList', description: 'Every git repository of the organisation, by name' });

const branchView = z
  .object({
    object: z.literal('git_branch'),
    name: z.string().describe('Branch name, without refs/heads/'),
    commit: z.string().describe('The commit it points at (40 hex)'),
  })
  .meta({ id: 'GitBranch', description: 'A branch of a git repository' });

const branchListView = z
  .object({ object: z.literal('list'), data: z.array(branchView).describe('By name') })
  .meta({ id: 'GitBranchList', description: 'Every branch of a repository, by name' });

const repoName = z.string().regex(REPO_NAME_PATTERN, 'lowercase letters, digits and dashes, 1 to 63 characters, starting with a letter or digit');

export interface GitHostOperationDeps {
  host: GitHost;
  /** The local git server's repositories, when it is the provider: creating one is the local server's. */
  local: { repos: LocalRepositories; host: LocalGitHost } | null;
}

/** `/client/githost/*`: reads open to every credential of the organisation, repository creation `apps:deploy`. */
export function githostOperations({ host, local }: GitHostOperationDeps): AnyOperation[] {
  const status = defineOperation({
    name: 'githost.status',
    method: 'GET',
    path: '/githost/status',
    summary: 'The git host apps are deployed from, and whether it is connected',
    description:
      'With the local git server (the default), repositories live on this service, pushed to at baseUrl. With GitHub: connected once the organisation holds an installation of the app.',
    scope: null,
    readOnly: true,
    output: statusView,
    async handler(_input, { credential }) {
      return { object: 'githost_status' as const, ...(await host.status(credential.organizationId)) };
    },
  });

  const repos = defineOperation({
    name: 'githost.repos',
    method: 'GET',
    path: '/githost/repos',
    summary: 'The organisation’s git repositories',
    description: 'Every repository apps can be deployed from, by name (not paged: an organisation has few).',
    scope: null,
    readOnly: true,
    output: repositoryListView,
    async handler(_input, { credential }) {
      const list = await host.listRepos(credential.organizationId);
      return { object: 'list' as const, data: list.map((repo) => ({ object: 'git_repository' as const, ...repo })) };
    },
  });

  const branches = defineOperation({
    name: 'githost.branches',
    method: 'GET',
    path: '/githost/branches',
    summary: 'The branches of one of the organisation’s git repositories',
    scope: null,
    readOnly: true,
    query: z.strictObject({ repo: z.string().min(1).max(200).describe('The repository’s name') }),
    output: branchListView,
    errors: ['git_repository_not_found'],
    async handler({ query }, { credential }) {
      try {
        const list = await host.listBranches(credential.organizationId, query.repo);
        return { object: 'list' as const, data: list.map((branch) => ({ object: 'git_branch' as const, ...branch })) };
      } catch (error) {
        if (error instanceof GitRepositoryNotFoundError) throw new ApiError('git_repository_not_found');
        throw error;
      }
    },
  });

  const operations: AnyOperation[] = [status, repos, branches];
  if (local !== null) {
    operations.push(
      defineOperation({
        name: 'githost.repos.create',
        method: 'POST',
        path: '/githost/repos',
        summary: 'Create an empty repository on the local git server',
        description:
          'Only with the local git server. Push to its cloneUrl with an API key holding apps:deploy as the HTTP password ' +
          '(any user name); fetching needs apps:read. 409 when the organisation has a repository of that name.',
        scope: 'apps:deploy',
        readOnly: false,
        idempotent: false,
        status: 201,
        body: z.strictObject({ name: repoName.describe('Lowercase letters, digits and dashes, 1 to 63 characters') }),
        output: repositoryView,
        errors: ['git_repository_exists'],
        async handler({ body }, { credential }) {
          const created = await local.repos.create(credential.organizationId, body.name);
          if (!created) throw new ApiError('git_repository_exists', `The organisation has a git repository named ${body.name} already`);
          return { object: 'git_repository' as const, ...(await local.host.describe(credential.organizationId, body.name)) };
        },
      }),
    );
  }
  return operations;
}
