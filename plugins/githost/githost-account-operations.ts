import { z } from 'zod';
import type { Credential } from '../../core/identity/credential.ts';
import { ApiError } from '../../core/kernel/errors.ts';
import { type AnyOperation, defineOperation } from '../../core/operations/operations.ts';
import { allowedBy } from './allow-list.ts';
import type { GitHost, GitHostRepoUsers } from './git-host.ts';
import type { GitHostSettings, GitHostStore, Installation } from './githost-store.ts';
import type { GitHubApi } from './github/github-api.ts';
import type { ClaimOutcome, GitHubConnections } from './github/github-connections.ts';
import { GITHUB_LOGIN, GITHUB_REPO_NAME } from './github/github-git-host.ts';
import { REPO_NAME_PATTERN } from './local/local-repos.ts';
// Catalogues the codes this module answers with (core/kernel/error-catalogue.ts).
import './githost-errors.ts';

export const MAX_ALLOWED_REPOS = 500;
export const MAX_ALLOWED_ORGS = 100;

const installationView = z
  .object({
    object: z.literal('githost_installation'),
    id: z.number().int().describe('The GitHub App installation id'),
    account: z.string().describe('The GitHub user or organisation it is installed on'),
    accountType: z.string().describe('User or Organization, as GitHub says'),
    held: z.boolean().describe('Whether this organisation deploys from it'),
    shared: z.boolean().describe('Whether this organisation lets other organisations of the service claim it too'),
  })
  .meta({ id: 'GitHostInstallation', description: 'An installation of the service’s GitHub App' });

const authorizationView = z
  .object({
    object: z.literal('githost_authorization'),
    provider: z.enum(['local', 'github']),
    connected: z.boolean().describe('Whether your git-host account is connected here (the local git server: always)'),
    login: z.string().nullable().describe('Your GitHub login; null with the local git server or before connecting'),
    connectedAt: z.string().nullable().describe('When you connected it (ISO 8601)'),
    installations: z.array(installationView).describe('Installations of the GitHub App your GitHub account reaches'),
  })
  .meta({ id: 'GitHostAuthorization', description: 'Your own git-host account, as connected to this organisation' });

const linkView = z
  .object({
    object: z.literal('githost_link'),
    url: z.string().describe('Open it in the browser; GitHub sends it back to /client/githost/callback'),
    expiresAt: z.string().describe('The link’s state is good until then (ISO 8601)'),
  })
  .meta({ id: 'GitHostLink', description: 'Where to send the browser on GitHub' });

const memberConnectView = z
  .object({
    object: z.literal('githost_member_connect'),
    allowed: z.boolean().describe('Whether members (not only owners and admins) may connect their own git-host accounts'),
  })
  .meta({ id: 'GitHostMemberConnect', description: 'The organisation’s policy on members connecting git-host accounts' });

const allowListView = z
  .object({
    object: z.literal('githost_repo_allow_list'),
    restricted: z.boolean().describe('While true, repositories outside the list cannot be chosen, browsed or deployed (404)'),
    mode: z.enum(['repos', 'orgs']).describe('Which list applies while restricted'),
    allowed: z.array(z.string()).describe('Repositories allowed in repos mode (owner/name); kept in orgs mode'),
    allowedOrgs: z.array(z.string()).describe('Accounts whose repositories are allowed in orgs mode; kept in repos mode'),
    candidates: z.array(z.string()).describe('Every repository the git host shows this organisation'),
    candidateOrgs: z.array(z.string()).describe('Accounts the organisation’s installations are on'),
  })
  .meta({ id: 'GitHostRepoAllowList', description: 'The repositories apps may be deployed from' });

const installationId = z.number().int().min(1).max(Number.MAX_SAFE_INTEGER).describe('A GitHub App installation id');

export interface GitHostAccountDeps {
  /** The provider itself (not behind the allow-list): what names are checked against. */
  provider: GitHost;
  store: GitHostStore;
  /** Null with the local git server. */
  github: { api: GitHubApi; connections: GitHubConnections } | null;
  repoUsers: () => readonly GitHostRepoUsers[];
  clock: () => Date;
  /** `server.publicUrl`'s origin, else null (the request's own then). */
  publicOrigin: string | null;
}

/** The person behind a session or connector; API keys never reach these handlers (personOnly). */
function personOf(credential: Credential): { personId: string; role: string } {
  if (credential.kind === 'key') throw new ApiError('person_required');
  return { personId: credential.personId, role: credential.role };
}

/**
 * The git-host account routes: a person's own GitHub account (authorize, callback, authorization),
 * the installations the organisation deploys from (claim, share, add-installation), and the owner's
 * policies (member-connect, repo-allow-list). With the local git server there is nothing to connect:
 * the account routes answer 400 `githost_not_oauth`, GET authorization reports it always connected,
 * and the owner's policies are kept and applied all the same (README "Accounts and policies").
 */
export function githostAccountOperations(deps: GitHostAccountDeps): AnyOperation[] {
  const { store, clock } = deps;

  const requireGithub = () => {
    if (deps.github === null) throw new ApiError('githost_not_oauth');
    return deps.github;
  };

  /** Owners and admins always; members only while the owner allows it. */
  const mayConnect = async (credential: Credential) => {
    const { role } = personOf(credential);
    if (role === 'member' && !(await store.settings(credential.organizationId)).membersMayConnect) throw new ApiError('githost_member_connect_off');
  };

  const origin = (ctxOrigin: string | undefined) => deps.publicOrigin ?? ctxOrigin ?? 'http://localhost';

  const viewOfInstallation = (installation: { id: number; accountLogin: string; accountType: string }, held: Installation | undefined) => ({
    object: 'githost_installation' as const,
    id: installation.id,
    account: installation.accountLogin,
    accountType: installation.accountType,
    held: held !== undefined,
    shared: held?.shared ?? false,
  });

  const claimError = (outcome: Exclude<ClaimOutcome, { ok: true }>) => {
    if (outcome.reason === 'not_authorized') return new ApiError('githost_not_authorized');
    if (outcome.reason === 'not_visible') {
      return new ApiError('githost_installation_not_found', 'Your GitHub account reaches no such installation of the app', { param: 'installationId' });
    }
    return new ApiError('githost_installation_claimed', undefined, { param: 'installationId' });
  };

  const authorize = defineOperation({
    name: 'githost.authorize',
    method: 'GET',
    path: '/githost/authorize',
    summary: 'Start connecting your GitHub account: the URL to send the browser to',
    description:
      'Answers the GitHub authorization URL with a one-time state (10 minutes). GitHub sends the browser back to ' +
      '/client/githost/callback, which stores your token in the secret vault. Members need the owner’s member-connect ' +
      'policy. With the local git server: 400 githost_not_oauth (there is nothing to connect).',
    scope: null,
    readOnly: false,
    personOnly: true,
    output: linkView,
    errors: ['githost_not_oauth', 'githost_member_connect_off'],
    async handler(_input, { credential, origin: ctxOrigin }) {
      const github = requireGithub();
      await mayConnect(credential);
      const { state, expiresAt } = await github.connections.begin(credential.organizationId, personOf(credential).personId);
      const url = github.api.authorizeUrl(state, github.connections.redirectUri(origin(ctxOrigin)));
      return { object: 'githost_link' as const, url, expiresAt: expiresAt.toISOString() };
    },
  });

  const authorizationAnswer = async (credential: Credential) => {
    if (deps.github === null) {
      return { object: 'githost_authorization' as const, provider: 'local' as const, connected: true, login: null, connectedAt: null, installations: [] };
    }
    const { personId } = personOf(credential);
    const stored = await store.authorization(credential.organizationId, personId);
    const reachable = stored === null ? null : await deps.github.connections.reachable(credential.organizationId, personId);
    const held = await store.installations(credential.organizationId);
    return {
      object: 'githost_authorization' as const,
      provider: 'github' as const,
      connected: reachable !== null,
      login: stored?.githubLogin ?? null,
      connectedAt: stored?.createdAt.toISOString() ?? null,
      installations: (reachable ?? []).map((i) =>
        viewOfInstallation(
          i,
          held.find((h) => h.installationId === i.id),
        ),
      ),
    };
  };

  const authorization = defineOperation({
    name: 'githost.authorization',
    method: 'GET',
    path: '/githost/authorization',
    summary: 'Your git-host account as connected here, and the installations it reaches',
    description: 'connected is false once GitHub no longer takes your token (revoked there). The local git server is always connected.',
    scope: null,
    readOnly: true,
    personOnly: true,
    output: authorizationView,
    async handler(_input, { credential }) {
      return authorizationAnswer(credential);
    },
  });

  const disconnect = defineOperation({
    name: 'githost.authorization.delete',
    method: 'DELETE',
    path: '/githost/authorization',
    summary: 'Forget your GitHub account here',
    description:
      'Deletes your token from the secret vault. Installations the organisation holds stay (apps keep deploying). ' +
      'The grant itself stays on GitHub until you revoke it in your GitHub settings. Local git server: 400 githost_not_oauth.',
    scope: null,
    readOnly: false,
    destructive: true,
    idempotent: true,
    personOnly: true,
    output: authorizationView,
    errors: ['githost_not_oauth'],
    async handler(_input, { credential, transaction }) {
      const github = requireGithub();
      const { personId } = personOf(credential);
      await transaction((tx) => github.connections.disconnect(tx, credential.organizationId, personId));
      return authorizationAnswer(credential);
    },
  });

  const claim = defineOperation({
    name: 'githost.claim',
    method: 'POST',
    path: '/githost/claim',
    summary: 'Deploy from an installation of the GitHub App your GitHub account reaches',
    description:
      'Links the installation to this organisation: its repositories become this organisation’s to deploy from. 404 when ' +
      'your GitHub account does not reach it; 409 when another organisation here holds it and does not share it. ' +
      'Claiming one held already changes nothing.',
    scope: null,
    readOnly: false,
    idempotent: true,
    personOnly: true,
    body: z.strictObject({ installationId }),
    output: installationView,
    errors: ['githost_not_oauth', 'githost_member_connect_off', 'githost_not_authorized', 'githost_installation_not_found', 'githost_installation_claimed'],
    async handler({ body }, { credential, transaction }) {
      const github = requireGithub();
      await mayConnect(credential);
      const { personId } = personOf(credential);
      const outcome = await github.connections.claim(credential.organizationId, personId, body.installationId, transaction);
      if (!outcome.ok) throw claimError(outcome);
      const i = outcome.installation;
      return viewOfInstallation({ id: i.installationId, accountLogin: i.accountLogin, accountType: i.accountType }, i);
    },
  });

  const share = defineOperation({
    name: 'githost.share',
    method: 'POST',
    path: '/githost/share',
    summary: 'Let other organisations of the service claim an installation this one holds',
    description:
      'shared true: a person of another organisation whose GitHub account reaches the installation may claim it too (each ' +
      'organisation then deploys from it). false: no new organisation may; those holding it keep it. Owners and admins.',
    scope: null,
    readOnly: false,
    idempotent: true,
    roles: ['owner', 'admin'],
    body: z.strictObject({ installationId, shared: z.boolean().describe('Whether other organisations may claim it') }),
    output: installationView,
    errors: ['githost_not_oauth', 'githost_installation_not_found'],
    async handler({ body }, { credential, transaction }) {
      requireGithub();
      const changed = await transaction((tx) => store.setShared(tx, credential.organizationId, body.installationId, body.shared));
      if (!changed) throw new ApiError('githost_installation_not_found', 'This organisation holds no such installation', { param: 'installationId' });
      const held = (await store.installations(credential.organizationId)).find((i) => i.installationId === body.installationId);
      if (!held) throw new ApiError('githost_installation_not_found', 'This organisation holds no such installation', { param: 'installationId' });
      return viewOfInstallation({ id: held.installationId, accountLogin: held.accountLogin, accountType: held.accountType }, held);
    },
  });

  const addInstallation = defineOperation({
    name: 'githost.add_installation',
    method: 'POST',
    path: '/githost/add-installation',
    summary: 'Install the GitHub App on another GitHub account: the URL to send the browser to',
    description:
      'GitHub asks where to install the app and which repositories it may read, then sends the browser back to ' +
      '/client/githost/callback with the installation, which this organisation then holds (as with claim). ' +
      'Local git server: 400 githost_not_oauth.',
    scope: null,
    readOnly: false,
    personOnly: true,
    wide: true,
    output: linkView,
    errors: ['githost_not_oauth', 'githost_member_connect_off'],
    async handler(_input, { credential }) {
      const github = requireGithub();
      await mayConnect(credential);
      const { state, expiresAt } = await github.connections.begin(credential.organizationId, personOf(credential).personId);
      return { object: 'githost_link' as const, url: github.api.installUrl(state), expiresAt: expiresAt.toISOString() };
    },
  });

  const memberConnect = defineOperation({
    name: 'githost.member_connect',
    method: 'POST',
    path: '/githost/member-connect',
    summary: 'Whether members may connect their own git-host accounts',
    description:
      'Owner only. Owners and admins always may; with allowed false (the default) members get 403 githost_member_connect_off ' +
      'from authorize, claim and add-installation. Kept with the local git server too, where nothing is connected.',
    scope: null,
    readOnly: false,
    idempotent: true,
    ownerOnly: true,
    body: z.strictObject({ allowed: z.boolean().describe('Whether members may connect their git-host accounts') }),
    output: memberConnectView,
    async handler({ body }, { credential, transaction }) {
      await transaction(async (tx) => {
        const now = clock();
        const settings = await store.lockSettings(tx, credential.organizationId, now);
        await store.saveSettings(tx, credential.organizationId, { ...settings, membersMayConnect: body.allowed }, now);
      });
      return { object: 'githost_member_connect' as const, allowed: body.allowed };
    },
  });

  const candidatesOf = async (organizationId: string) => {
    const repos = (await deps.provider.listRepos(organizationId)).map((repo) => repo.name);
    const orgs = deps.github === null ? [] : [...new Set((await store.installations(organizationId)).map((i) => i.accountLogin))].sort();
    return { repos, orgs };
  };

  const allowListAnswer = (settings: GitHostSettings, candidates: { repos: string[]; orgs: string[] }) => ({
    object: 'githost_repo_allow_list' as const,
    restricted: settings.restricted,
    mode: settings.mode,
    allowed: settings.repos,
    allowedOrgs: settings.orgs,
    candidates: candidates.repos,
    candidateOrgs: candidates.orgs,
  });

  const getAllowList = defineOperation({
    name: 'githost.repo_allow_list',
    method: 'GET',
    path: '/githost/repo-allow-list',
    summary: 'The repositories apps may be deployed from',
    description: 'Owner only. candidates and candidateOrgs are what the lists may name.',
    scope: null,
    readOnly: true,
    ownerOnly: true,
    wide: true,
    output: allowListView,
    async handler(_input, { credential }) {
      const [settings, candidates] = await Promise.all([store.settings(credential.organizationId), candidatesOf(credential.organizationId)]);
      return allowListAnswer(settings, candidates);
    },
  });

  const repoName = deps.github === null ? REPO_NAME_PATTERN : GITHUB_REPO_NAME;

  const putAllowList = defineOperation({
    name: 'githost.repo_allow_list.replace',
    method: 'PUT',
    path: '/githost/repo-allow-list',
    summary: 'Replace the repository allow-list',
    description:
      'Owner only. A full replace, except that an omitted repos or orgs keeps the stored list (both are kept whichever ' +
      'mode is active). 400 for a name that is not owner/name (a plain name with the local git server), a repository ' +
      'the git host does not show this organisation, or an account no installation of it is on; 409 when an app here ' +
      'deploys from a repository the new setting leaves out.',
    scope: null,
    readOnly: false,
    idempotent: true,
    ownerOnly: true,
    wide: true,
    body: z.strictObject({
      restricted: z.boolean().describe('Whether the list applies'),
      mode: z.enum(['repos', 'orgs']).optional().describe('Which list applies; omitted: the stored mode (repos at first)'),
      repos: z.array(z.string().min(1).max(141)).max(MAX_ALLOWED_REPOS).optional().describe('owner/name; omitted: kept'),
      orgs: z.array(z.string().min(1).max(39)).max(MAX_ALLOWED_ORGS).optional().describe('GitHub accounts; omitted: kept'),
    }),
    output: allowListView,
    errors: ['githost_repo_not_visible', 'githost_org_not_connected', 'githost_allow_list_conflict'],
    async handler({ body }, { credential, transaction }) {
      const organizationId = credential.organizationId;
      body.repos?.forEach((name, i) => {
        if (!repoName.test(name)) throw new ApiError('invalid_parameter', `Invalid 'repos.${i}' in body: not a repository name`, { param: `repos.${i}` });
      });
      body.orgs?.forEach((name, i) => {
        if (!GITHUB_LOGIN.test(name)) throw new ApiError('invalid_parameter', `Invalid 'orgs.${i}' in body: not an account name`, { param: `orgs.${i}` });
      });
      const candidates = await candidatesOf(organizationId);
      const knownRepos = new Map(candidates.repos.map((name) => [name.toLowerCase(), name]));
      const knownOrgs = new Map(candidates.orgs.map((name) => [name.toLowerCase(), name]));
      const repos = body.repos?.map((name, i) => {
        const known = knownRepos.get(name.toLowerCase());
        if (known === undefined) throw new ApiError('githost_repo_not_visible', `The git host shows this organisation no repository ${name}`, { param: `repos.${i}` });
        return known;
      });
      const orgs = body.orgs?.map((name, i) => {
        const known = knownOrgs.get(name.toLowerCase());
        if (known === undefined) throw new ApiError('githost_org_not_connected', `No installation of this organisation is on ${name}`, { param: `orgs.${i}` });
        return known;
      });
      const saved = await transaction(async (tx) => {
        const now = clock();
        const stored = await store.lockSettings(tx, organizationId, now);
        const next: GitHostSettings = {
          ...stored,
          restricted: body.restricted,
          mode: body.mode ?? stored.mode,
          repos: repos ? [...new Set(repos)] : stored.repos,
          orgs: orgs ? [...new Set(orgs)] : stored.orgs,
        };
        const cut: string[] = [];
        for (const users of deps.repoUsers()) {
          for (const use of await users.reposInUse(tx, organizationId)) {
            if (!allowedBy(next, use.repo)) cut.push(`${use.usedBy} (${use.repo})`);
          }
        }
        if (cut.length > 0) {
          const param = next.mode === 'repos' ? 'repos' : 'orgs';
          throw new ApiError('githost_allow_list_conflict', `Still deployed from what the list leaves out: ${cut.slice(0, 10).join(', ')}`, { param });
        }
        await store.saveSettings(tx, organizationId, next, now);
        return next;
      });
      return allowListAnswer(saved, candidates);
    },
  });

  return [authorize, authorization, disconnect, claim, share, addInstallation, memberConnect, getAllowList, putAllowList];
}
