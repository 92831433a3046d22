import { createPrivateKey } from 'node:crypto';
import { resolve } from 'node:path';
import { z } from 'zod';
import { ConfigError } from '../../config/load.ts';
import type { AppConfig } from '../../config/schema.ts';
import { createToken } from '../../core/kernel/container.ts';
import { Tokens } from '../../core/kernel/di-tokens.ts';
import { definePlugin } from '../../core/kernel/plugin.ts';
import { publicOriginOf } from '../../core/http/request-origin.ts';
import { OrganizationErasersPoint } from '../../core/kernel/organization-erasure.ts';
import { cloneRepository, listRemoteBranches } from './clone.ts';
import { AllowListedGitHost } from './allow-list.ts';
import { type CloneFromUrl, type GitHost, GitHostRepoUsersPoint, GitHostTokens } from './git-host.ts';
import { GIT_PACKAGE, gitIsAvailable } from './git-process.ts';
import { githostAccountOperations } from './githost-account-operations.ts';
import { githostAccountsEraser, githostErasure } from './githost-erasure.ts';
import { githostMigrations } from './githost-migrations.ts';
import { githostOperations } from './githost-operations.ts';
import { GitHostStore } from './githost-store.ts';
import { GitHubApi } from './github/github-api.ts';
import { GitHubConnections } from './github/github-connections.ts';
import { GitHubGitHost } from './github/github-git-host.ts';
import { mountGitHubRoutes } from './github/github-routes.ts';
import { mountGitRoutes } from './local/git-routes.ts';
import { LocalGitHost } from './local/local-git-host.ts';
import { LocalRepositories } from './local/local-repos.ts';
import { PushRecorder } from './local/push-recorder.ts';
import './githost-events.ts';

const MiB = 1024 * 1024;

/** What tests reach of the provider beneath the allow-list. */
export const LocalTokens = {
  Repositories: createToken<LocalRepositories>('githost.LocalRepositories'),
  Store: createToken<GitHostStore>('githost.Store'),
  /** The provider itself, not behind the allow-list. */
  Provider: createToken<GitHost>('githost.Provider'),
  GitHub: createToken<{ api: GitHubApi; connections: GitHubConnections } | null>('githost.GitHub'),
};

export const githostConfigSchema = z.strictObject({
  /** Where repositories live: `local`, this service's own git server, or `github`, a GitHub App (`github` below). */
  provider: z.enum(['local', 'github']).default('local'),
  /** The GitHub App, with `provider: github`. Secrets by `${VAR}` from the environment, never in the file. */
  github: z
    .strictObject({
      appId: z.string().regex(/^[0-9]+$/, 'the numeric App ID GitHub shows on the app’s page'),
      /** The app's name in its public URL: https://github.com/apps/<appSlug>. */
      appSlug: z.string().regex(/^[a-z0-9][a-z0-9-]{0,99}$/),
      /** PEM of a private key generated for the app (signs its JWTs). */
      privateKey: z.string().min(1),
      clientId: z.string().min(1),
      clientSecret: z.string().min(1),
      /** What GitHub signs webhook deliveries with (X-Hub-Signature-256). */
      webhookSecret: z.string().min(16),
      apiBaseUrl: z.url({ protocol: /^https?$/ }).default('https://api.github.com'),
      webBaseUrl: z.url({ protocol: /^https?$/ }).default('https://github.com'),
    })
    .optional(),
  local: z
    .strictObject({
      /** Default `<storage.dataDir>/git`. */
      dir: z.string().min(1).optional(),
      /** Largest body of one push (or fetch request), after inflating. */
      maxPushBytes: z
        .number()
        .int()
        .min(1024)
        .default(200 * MiB),
      /** Longest one git request may take before git is killed. */
      timeoutMs: z.number().int().min(1000).default(300_000),
    })
    .prefault({}),
  clone: z
    .strictObject({
      /** Largest clone of a repository from a URL: past it the clone is killed and removed. */
      maxBytes: z
        .number()
        .int()
        .min(1024)
        .default(500 * MiB),
      timeoutMs: z.number().int().min(1000).default(300_000),
    })
    .prefault({}),
});

export type GithostConfig = z.output<typeof githostConfigSchema>;

/** `<publicUrl or where the service listens>/git`: what clone URLs start with. */
export function gitBaseUrl(server: AppConfig['server']): string {
  if (server.publicUrl) return `${server.publicUrl.replace(/\/+$/, '')}/git`;
  const host = server.host === '0.0.0.0' || server.host === '::' ? '127.0.0.1' : server.host.includes(':') ? `[${server.host}]` : server.host;
  return `http://${host}:${server.port}/git`;
}

/** Where the local git server keeps its repositories. */
export function gitRoot(config: GithostConfig, appConfig: AppConfig): string {
  return resolve(config.local.dir ?? `${appConfig.storage.dataDir}/git`);
}

/**
 * Git hosting for apps: the git host port (git-host.ts) the apps plugin deploys from, and its
 * `local` provider, bare repositories on this machine served over smart HTTP at `/git/…`.
 */
export const githostPlugin = definePlugin({
  name: 'githost',
  description: 'Git repositories apps are deployed from: the local git server (smart HTTP at /git) or a GitHub App, and the allow-list',
  configSchema: githostConfigSchema,
  migrations: githostMigrations,
  register({ container, extensions, config, appConfig }) {
    const repos = new LocalRepositories(gitRoot(config, appConfig));
    const store = new GitHostStore(container.resolve(Tokens.Database));
    const policy = { allowPrivate: appConfig.outbound.allowPrivateNetwork };
    const clone: CloneFromUrl = (request) => cloneRepository({ ...request, ...config.clone, policy });
    let provider: GitHost;
    let github: { api: GitHubApi; connections: GitHubConnections } | null = null;
    if (config.provider === 'github') {
      if (!config.github) throw new ConfigError('config: plugins.githost.github: provider github needs the GitHub App (appId, appSlug, privateKey, clientId, clientSecret, webhookSecret)');
      try {
        createPrivateKey(config.github.privateKey);
      } catch {
        throw new ConfigError('config: plugins.githost.github.privateKey: not a PEM private key (download one from the GitHub App’s settings)');
      }
      const vault = container.resolve(Tokens.Secrets);
      const clock = container.resolve(Tokens.Clock);
      const api = new GitHubApi(config.github, container.resolve(Tokens.OutboundHttp), vault, clock);
      const connections = new GitHubConnections({ api, store, database: container.resolve(Tokens.Database), vault, clock });
      github = { api, connections };
      provider = new GitHubGitHost(api, store, clone);
      extensions.contribute(OrganizationErasersPoint, githostAccountsEraser(store, vault));
    } else {
      provider = new LocalGitHost(repos, gitBaseUrl(appConfig.server));
    }
    container.bindValue(GitHostTokens.Host, new AllowListedGitHost(provider, store));
    container.bindValue(GitHostTokens.Clone, clone);
    container.bindValue(GitHostTokens.RemoteBranches, (url) => listRemoteBranches({ url, timeoutMs: config.clone.timeoutMs, policy }));
    container.bindValue(LocalTokens.Repositories, repos);
    container.bindValue(LocalTokens.Store, store);
    container.bindValue(LocalTokens.Provider, provider);
    container.bindValue(LocalTokens.GitHub, github);
    extensions.contribute(OrganizationErasersPoint, githostErasure.eraser(repos, container.resolve(Tokens.Jobs)));
    extensions.contribute(OrganizationErasersPoint, githostErasure.records());
  },
  operations: ({ container, extensions, appConfig }) => {
    const host = container.resolve(GitHostTokens.Host);
    const provider = container.resolve(LocalTokens.Provider);
    const repos = container.resolve(LocalTokens.Repositories);
    return [
      ...githostOperations({ host, local: provider instanceof LocalGitHost ? { repos, host: provider } : null }),
      ...githostAccountOperations({
        provider,
        store: container.resolve(LocalTokens.Store),
        github: container.resolve(LocalTokens.GitHub),
        repoUsers: () => extensions.all(GitHostRepoUsersPoint),
        clock: container.resolve(Tokens.Clock),
        publicOrigin: publicOriginOf(appConfig.server.publicUrl),
      }),
    ];
  },
  queues: ({ container }) => [githostErasure.handler(container.resolve(LocalTokens.Repositories))],
  async routes(app, { container, config, appConfig }) {
    const github = container.resolve(LocalTokens.GitHub);
    if (github !== null && config.github) {
      await mountGitHubRoutes(app, {
        connections: github.connections,
        store: container.resolve(LocalTokens.Store),
        database: container.resolve(Tokens.Database),
        events: container.resolve(Tokens.Events),
        webhookSecret: config.github.webhookSecret,
        publicOrigin: publicOriginOf(appConfig.server.publicUrl),
      });
    }
    const repos = container.resolve(LocalTokens.Repositories);
    await mountGitRoutes(app, {
      repos,
      authenticator: container.resolve(Tokens.Authenticator),
      pushes: new PushRecorder({ repos, database: container.resolve(Tokens.Database), events: container.resolve(Tokens.Events) }),
      maxPushBytes: config.local.maxPushBytes,
      timeoutMs: config.local.timeoutMs,
    });
  },
  async start() {
    // The local git server runs git for every request: without it the service would answer 500s.
    if (!gitIsAvailable()) {
      throw new ConfigError(
        `config: plugins.githost: git is not installed (no git on PATH); install the Debian package '${GIT_PACKAGE}' (apt-get install ${GIT_PACKAGE}) or turn the githost plugin off`,
      );
    }
  },
});
