import { resolve } from 'node:path';
import { z } from 'zod';
import { ConfigError } from '../../config/load.ts';
import type { AppConfig } from '../../config/schema.ts';
import { createToken } from '../../core/kernel/container.ts';
import { Tokens } from '../../core/kernel/di-tokens.ts';
import { definePlugin } from '../../core/kernel/plugin.ts';
import { OrganizationErasersPoint } from '../../core/kernel/organization-erasure.ts';
import { cloneRepository, listRemoteBranches } from './clone.ts';
import { GitHostTokens } from './git-host.ts';
import { GIT_PACKAGE, gitIsAvailable } from './git-process.ts';
import { githostErasure } from './githost-erasure.ts';
import { githostOperations } from './githost-operations.ts';
import { mountGitRoutes } from './local/git-routes.ts';
import { LocalGitHost } from './local/local-git-host.ts';
import { LocalRepositories } from './local/local-repos.ts';
import { PushRecorder } from './local/push-recorder.ts';
import './githost-events.ts';

const MiB = 1024 * 1024;

const LocalTokens = {
  Repositories: createToken<LocalRepositories>('githost.LocalRepositories'),
};

export const githostConfigSchema = z.strictObject({
  /** Where repositories live: `local`, this service's own git server (the only provider so far). */
  provider: z.enum(['local']).default('local'),
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
  description: 'Git repositories apps are deployed from: the local git server (smart HTTP at /git), repositories and branches',
  configSchema: githostConfigSchema,
  register({ container, extensions, config, appConfig }) {
    const repos = new LocalRepositories(gitRoot(config, appConfig));
    const host = new LocalGitHost(repos, gitBaseUrl(appConfig.server));
    container.bindValue(GitHostTokens.Host, host);
    const policy = { allowPrivate: appConfig.outbound.allowPrivateNetwork };
    container.bindValue(GitHostTokens.Clone, (request) => cloneRepository({ ...request, ...config.clone, policy }));
    container.bindValue(GitHostTokens.RemoteBranches, (url) => listRemoteBranches({ url, timeoutMs: config.clone.timeoutMs, policy }));
    container.bindValue(LocalTokens.Repositories, repos);
    extensions.contribute(OrganizationErasersPoint, githostErasure.eraser(repos, container.resolve(Tokens.Jobs)));
  },
  operations: ({ container }) => {
    const host = container.resolve(GitHostTokens.Host);
    const repos = container.resolve(LocalTokens.Repositories);
    return githostOperations({ host, local: host instanceof LocalGitHost ? { repos, host } : null });
  },
  queues: ({ container }) => [githostErasure.handler(container.resolve(LocalTokens.Repositories))],
  async routes(app, { container, config }) {
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
