import { lstat, readdir } from 'node:fs/promises';
import path from 'node:path';
import { z } from 'zod';
import { ApiError } from '../../core/kernel/errors.ts';
import { type AnyOperation, defineOperation } from '../../core/operations/operations.ts';
import { type AppSource, type SourceDeps, urlRefusal, withSourceTree } from './app-sources.ts';
import { BuildDecisionError, decideBuild, missingEnv, type SourceTree } from './build-decision/index.ts';
import { DETECTORS } from './build-decision/decide.ts';
import { hasMarker } from './build-decision/detection.ts';
import { findCandidates } from './build-decision/root-dir.ts';
import { normalizeRelative } from './build-decision/source-tree.ts';
import type { HostingPrices } from './hosting-prices.ts';
import { DEFAULT_LIMITS } from './runtime/index.ts';
import './deploy-errors.ts';

export interface AnalysisOperationDeps {
  sources: SourceDeps;
  /** The memory an app instance may use (runtime.limits.memoryBytes): its memory tier. */
  memoryBytes: number | undefined;
  /** The hosting ledger's prices (`plugins.apps.hosting.prices`): the estimate charges as the ledger does. */
  prices: HostingPrices;
}

/** Hours in an average month (365.25 × 24 / 12). */
export const HOURS_PER_MONTH = 730.5;

const sourceQuery = {
  repo: z.string().min(1).max(200).optional().describe('A repository of the git host (or give gitUrl)'),
  gitUrl: z.string().min(1).max(2000).optional().describe('An http(s) git URL (or give repo): cloned through the guarded clone'),
  branch: z.string().min(1).max(255).optional().describe('Default: the repository’s default branch'),
};
const rootDir = z.string().min(1).max(500).optional().describe('The app’s folder, relative to the repository’s top');

const refusalCodes = ['git_repository_not_found', 'git_repository_empty', 'git_branch_not_found', 'git_url_refused', 'git_clone_failed'] as const;

const rootsView = z
  .object({
    object: z.literal('list'),
    commit: z.string(),
    topIsApp: z.boolean().describe('Whether the repository’s top is an app itself (rootDir may be left out)'),
    data: z.array(z.object({ path: z.string().describe('A folder rootDir can take'), providers: z.array(z.string()).describe('Who recognised it') })),
  })
  .meta({ id: 'AppRootList', description: 'The folders of a repository that are apps, sorted (three levels deep at most)' });

const analysisView = z
  .object({
    object: z.literal('app_analysis'),
    commit: z.string(),
    buildable: z.boolean(),
    decision: z.record(z.string(), z.unknown()).nullable().describe('Each field {value, rule, evidence}; null when it cannot build'),
    refusal: z.record(z.string(), z.unknown()).nullable().describe('What a deploy would be refused with: code, message, param and its details (candidates, supported…)'),
    envKeys: z.array(z.string()).nullable(),
    missingEnv: z.array(z.string()).nullable().describe('envKeys nothing sets yet (the service sets PORT)'),
  })
  .meta({ id: 'AppAnalysis', description: 'The build decision for a repository, branch and rootDir, or why it cannot build (never a 400)' });

const insightView = z
  .object({
    object: z.literal('app_insight'),
    commit: z.string(),
    name: z.string().nullable().describe('The name the app gives itself (package.json, pyproject.toml, go.mod)'),
    description: z.string().nullable().describe('Its own description, else the README’s first paragraph'),
    provider: z.string().nullable(),
    framework: z.string().nullable(),
    start: z.string().nullable(),
    dependencies: z.number().int().nullable().describe('Declared dependencies (package.json, requirements.txt); null when unknown'),
    files: z.number().int().describe('Files in the app’s folder (the tree reader’s cap applies)'),
    bytes: z.number().int(),
  })
  .meta({ id: 'AppInsight', description: 'What the app in a repository is' });

const estimateView = z
  .object({
    object: z.literal('app_cost_estimate'),
    memoryTierBytes: z.number().int().describe('The memory an instance may use: the tier it is billed at'),
    instances: z.number().int(),
    hoursPerMonth: z.number(),
    microsPerHour: z.number().int().describe('µUSD an instance-hour costs at that tier (plugins.apps.hosting.prices)'),
    monthlyMicros: z.number().int().describe('µUSD for a month of the instances running all the time'),
    monthlyUsd: z.string().describe('The same in USD, two decimals'),
  })
  .meta({ id: 'AppCostEstimate', description: 'An estimate of a month’s hosting: instances × memory tier × hours × price' });

const reachableView = z
  .object({
    object: z.literal('git_reachability'),
    reachable: z.boolean(),
    reason: z.string().nullable().describe('Why not, when not'),
    code: z.string().nullable().describe('git_url_refused (the guard) or git_clone_failed (the remote)'),
    defaultBranch: z.string().nullable(),
    branches: z.number().int().nullable(),
  })
  .meta({ id: 'GitReachability', description: 'Whether a git URL can be cloned from here (a guarded ls-remote, nothing cloned)' });

/** Exactly one of repo and gitUrl; the branch default is the source's. */
async function sourceFrom(
  deps: AnalysisOperationDeps,
  organizationId: string,
  query: { repo?: string | undefined; gitUrl?: string | undefined; branch?: string | undefined },
): Promise<AppSource> {
  if ((query.repo === undefined) === (query.gitUrl === undefined)) {
    throw new ApiError('invalid_parameter', 'Give repo (a repository of the git host) or gitUrl, one of them', { param: query.repo === undefined ? 'repo' : 'gitUrl' });
  }
  if (query.gitUrl !== undefined) {
    const url = query.gitUrl;
    let branch = query.branch;
    if (branch === undefined) {
      try {
        branch = (await deps.sources.remoteBranches(url)).defaultBranch ?? 'main';
      } catch (error) {
        throw urlRefusal(error, url);
      }
    }
    return { kind: 'url', url, branch };
  }
  const repo = query.repo!;
  const branch = query.branch ?? (await deps.sources.git.listRepos(organizationId)).find((entry) => entry.name === repo)?.defaultBranch ?? 'main';
  return { kind: 'githost', repo, branch };
}

async function providersOf(tree: SourceTree): Promise<string[]> {
  const found: string[] = [];
  for (const detector of DETECTORS) if (await hasMarker(tree, detector.markers)) found.push(detector.provider);
  return found;
}

/** The first paragraph of a README, without its heading marks. */
function readmeParagraph(text: string): string | null {
  const paragraphs = text
    .split(/\n\s*\n/)
    .map((part) => part.trim())
    .filter((part) => part !== '' && !part.startsWith('#') && !part.startsWith('!['));
  return paragraphs[0] ? paragraphs[0].replace(/\s+/g, ' ').slice(0, 500) : null;
}

async function identity(tree: SourceTree): Promise<{ name: string | null; description: string | null; dependencies: number | null }> {
  const pkg = await tree.readText('package.json');
  if (pkg !== null) {
    try {
      const parsed = JSON.parse(pkg) as { name?: unknown; description?: unknown; dependencies?: Record<string, unknown> };
      return {
        name: typeof parsed.name === 'string' ? parsed.name : null,
        description: typeof parsed.description === 'string' ? parsed.description : null,
        dependencies: Object.keys(parsed.dependencies ?? {}).length,
      };
    } catch {}
  }
  const pyproject = await tree.readText('pyproject.toml');
  const requirements = await tree.readText('requirements.txt');
  const dependencies = requirements === null ? null : requirements.split('\n').filter((line) => line.trim() !== '' && !line.trim().startsWith('#')).length;
  if (pyproject !== null) {
    const name = /^\s*name\s*=\s*"([^"]+)"/m.exec(pyproject)?.[1] ?? null;
    const description = /^\s*description\s*=\s*"([^"]+)"/m.exec(pyproject)?.[1] ?? null;
    return { name, description, dependencies };
  }
  const gomod = await tree.readText('go.mod');
  if (gomod !== null) return { name: /^module\s+(\S+)/m.exec(gomod)?.[1] ?? null, description: null, dependencies: null };
  return { name: null, description: null, dependencies };
}

/** Files and bytes under a folder of the checkout (links not followed, .git skipped). */
async function sizeOf(dir: string): Promise<{ files: number; bytes: number }> {
  let files = 0;
  let bytes = 0;
  for (const entry of await readdir(dir, { withFileTypes: true }).catch(() => [])) {
    if (entry.name === '.git') continue;
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) {
      const inner = await sizeOf(full);
      files += inner.files;
      bytes += inner.bytes;
    } else if (entry.isFile()) {
      files += 1;
      bytes += (await lstat(full)).size;
    }
  }
  return { files, bytes };
}

/** `/githost/app-roots`, `app-analysis`, `app-insight`, `app-insight/estimate`, `reachable` (plugins/apps/README.md). */
export function analysisOperations(deps: AnalysisOperationDeps): AnyOperation[] {
  const roots = defineOperation({
    name: 'githost.app_roots',
    method: 'GET',
    path: '/githost/app-roots',
    summary: 'The folders of a repository that are apps: what rootDir can take',
    scope: null,
    readOnly: true,
    query: z.strictObject(sourceQuery),
    output: rootsView,
    errors: [...refusalCodes],
    async handler({ query }, { credential }) {
      const source = await sourceFrom(deps, credential.organizationId, query);
      return withSourceTree(deps.sources, credential.organizationId, source, async (tree, commit) => {
        const folders = await findCandidates(tree, DETECTORS);
        const data = await Promise.all(folders.map(async (path) => ({ path, providers: await providersOf(tree.subtree(path)) })));
        return { object: 'list' as const, commit, topIsApp: (await providersOf(tree)).length > 0, data };
      });
    },
  });

  const analysis = defineOperation({
    name: 'githost.app_analysis',
    method: 'GET',
    path: '/githost/app-analysis',
    summary: 'The build decision for a repository, branch and rootDir, with envKeys, or why it cannot build',
    description: 'Where build-check answers a refusal as the 400 a deploy would get, this answers it as `refusal` (200), for pickers.',
    scope: null,
    readOnly: true,
    query: z.strictObject({ ...sourceQuery, rootDir, startCommand: z.string().min(1).max(300).optional() }),
    output: analysisView,
    errors: [...refusalCodes],
    async handler({ query }, { credential }) {
      const source = await sourceFrom(deps, credential.organizationId, query);
      return withSourceTree(deps.sources, credential.organizationId, source, async (tree, commit) => {
        const result = await decideBuild(tree, {
          ...(query.rootDir !== undefined ? { rootDir: query.rootDir } : {}),
          overrides: query.startCommand !== undefined ? { startCommand: query.startCommand } : {},
        });
        if (!result.ok) {
          const refusal = result.error instanceof BuildDecisionError ? result.error.toEnvelope().error : { code: 'invalid_parameter', message: String(result.error) };
          return { object: 'app_analysis' as const, commit, buildable: false, decision: null, refusal, envKeys: null, missingEnv: null };
        }
        const { decision } = result;
        const missing = missingEnv(decision.envKeys, { caller: [], stored: [], serviceProvided: ['PORT'] }) ?? [];
        return {
          object: 'app_analysis' as const,
          commit,
          buildable: true,
          decision: decision as unknown as Record<string, unknown>,
          refusal: null,
          envKeys: [...decision.envKeys],
          missingEnv: [...missing],
        };
      });
    },
  });

  const insight = defineOperation({
    name: 'githost.app_insight',
    method: 'GET',
    path: '/githost/app-insight',
    summary: 'What the app in a repository is: its name, description, kind, size and dependencies',
    scope: null,
    readOnly: true,
    query: z.strictObject({ ...sourceQuery, rootDir }),
    output: insightView,
    errors: [...refusalCodes],
    async handler({ query }, { credential }) {
      const source = await sourceFrom(deps, credential.organizationId, query);
      return withSourceTree(deps.sources, credential.organizationId, source, async (whole, commit, dir) => {
        const result = await decideBuild(whole, query.rootDir !== undefined ? { rootDir: query.rootDir } : {});
        // A refused decision still describes the folder asked for, when it is one inside the tree.
        const asked = query.rootDir === undefined ? null : normalizeRelative(query.rootDir);
        if (!result.ok && query.rootDir !== undefined && (asked === null || asked === '' || !(await whole.isDirectory(asked)))) throw result.error;
        const folder = result.ok ? result.decision.rootDir.value : (asked ?? '.');
        const tree = folder === '.' || folder === null ? whole : whole.subtree(folder);
        const own = await identity(tree);
        const readme = own.description === null ? ((await tree.readText('README.md')) ?? (await tree.readText('README'))) : null;
        const size = await sizeOf(folder === '.' || folder === null ? dir : path.join(dir, folder));
        return {
          object: 'app_insight' as const,
          commit,
          name: own.name,
          description: own.description ?? (readme === null ? null : readmeParagraph(readme)),
          provider: result.ok ? result.decision.provider : null,
          framework: result.ok ? result.decision.framework.value : null,
          start: result.ok ? result.decision.start.value : null,
          dependencies: own.dependencies,
          ...size,
        };
      });
    },
  });

  const estimate = defineOperation({
    name: 'githost.app_insight_estimate',
    method: 'GET',
    path: '/githost/app-insight/estimate',
    summary: 'An estimated monthly hosting cost: instances × memory tier × hours × the price',
    description: 'Every app instance is billed at the memory tier the runtime gives it (runtime.limits.memoryBytes).',
    scope: null,
    readOnly: true,
    wide: true,
    query: z.strictObject({ instances: z.coerce.number().int().min(1).max(20).optional().describe('Instances running all month (default 1)') }),
    output: estimateView,
    async handler({ query }) {
      const tier = deps.memoryBytes ?? DEFAULT_LIMITS.memoryBytes;
      const instances = query.instances ?? 1;
      const microsPerHour = Number(deps.prices.tierOf(tier).microsPerHour);
      const monthlyMicros = Math.round(instances * HOURS_PER_MONTH * microsPerHour);
      return {
        object: 'app_cost_estimate' as const,
        memoryTierBytes: tier,
        instances,
        hoursPerMonth: HOURS_PER_MONTH,
        microsPerHour,
        monthlyMicros,
        monthlyUsd: (monthlyMicros / 1_000_000).toFixed(2),
      };
    },
  });

  const reachable = defineOperation({
    name: 'githost.reachable',
    method: 'GET',
    path: '/githost/reachable',
    summary: 'Whether a git URL can be cloned from here (a guarded ls-remote)',
    description: 'The URL passes the outbound guard (http(s), public addresses) and git lists its branches; nothing is cloned.',
    scope: null,
    readOnly: true,
    wide: true,
    query: z.strictObject({ gitUrl: z.string().min(1).max(2000).describe('An http(s) git URL') }),
    output: reachableView,
    async handler({ query }) {
      try {
        const remote = await deps.sources.remoteBranches(query.gitUrl);
        return { object: 'git_reachability' as const, reachable: true, reason: null, code: null, defaultBranch: remote.defaultBranch, branches: remote.branches.length };
      } catch (error) {
        const refusal = urlRefusal(error, query.gitUrl);
        if (!(refusal instanceof ApiError)) throw refusal;
        return { object: 'git_reachability' as const, reachable: false, reason: refusal.message, code: refusal.code, defaultBranch: null, branches: null };
      }
    },
  });

  return [roots, analysis, insight, estimate, reachable];
}
