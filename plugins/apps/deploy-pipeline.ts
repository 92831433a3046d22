import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { promisify } from 'node:util';
import { cp, mkdir, readdir, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import { Readable } from 'node:stream';
import { z } from 'zod';
import type { JobQueue } from '../../core/jobs/job-queue.ts';
import { defineQueue, type Job, type QueueDefinition } from '../../core/jobs/queue-definitions.ts';
import type { BlobStore } from '../../core/ports/blobs.ts';
import type { JobLogs } from '../../core/jobs/job-logs.ts';
import { buildLogStream } from './build-log.ts';
import type { Transaction } from '../../core/ports/database.ts';
import type { AppsConfig } from './apps-config.ts';
import type { AppsHost } from './apps-host.ts';
import type { AppsStore, DeploymentRecord, Timings } from './apps-store.ts';
import { decideBuild, SourceTree } from './build-decision/index.ts';
import { BuildStepFailed, runBuildStep, scratchOf } from './build-runner.ts';
import type { RuntimeEnv } from './app-env.ts';
import { HealthFailure, RuntimeError } from './runtime/index.ts';
import { assembleStaticSite, StaticSiteMissing } from './runtime/static-site.ts';
import { checkoutSource, type SourceDeps, sourceOf } from './app-sources.ts';
import type { DeployCancels } from './deploy-cancels.ts';
import type { FailureCode } from './apps-views.ts';
import { proxyEnv, registryAuthority, startRegistryProxy } from './registry-proxy.ts';

const execFileAsync = promisify(execFile);

/** One job per deployment: build it (unless it reuses an artifact) and start it. */
export const buildQueue = defineQueue({
  name: 'apps.build',
  payload: z.strictObject({ deploymentId: z.uuid() }),
  // A run cut short (the worker died) runs again from the checkout; a deploy that failed is recorded failed, not retried.
  maxAttempts: 3,
  leaseMs: 120_000,
  backoff: { baseMs: 5_000, maxMs: 60_000 },
});

/** Enqueues a deployment's job in the transaction that created it; the deployment id is the key. */
export function enqueueDeployment(jobs: JobQueue, tx: Transaction, deploymentId: string): Promise<unknown> {
  return jobs.enqueue(buildQueue, { deploymentId }, { tx, idempotencyKey: deploymentId });
}

export interface PipelineDeps {
  store: AppsStore;
  host: AppsHost;
  sources: SourceDeps;
  cancels: DeployCancels;
  blobs: BlobStore;
  /** Where the running build's lines go (build-log.ts). */
  jobLogs: JobLogs;
  /** The stored variables plus the managed SVC_* ones, read at the deploy. */
  runtimeEnv: RuntimeEnv;
  config: AppsConfig;
  clock: () => Date;
  /** What runs around a deploy beside the pipeline (upkeep/: the release command, failure mail). */
  hooks?: DeployHooks;
  /** outbound.allowPrivateNetwork: the registry proxy may reach registries on loopback or a private network. */
  allowPrivateNetwork: boolean;
}

/** A deployment as the hooks see it. */
export interface DeployHookContext {
  deployment: DeploymentRecord;
  service: { id: string; organizationId: string; appId: string };
  app: { id: string; name: string; slug: string };
  /** Appends a line to the deployment's build log. */
  log: (stream: string, line: string) => void;
}

export interface DeployHooks {
  /**
   * Runs after the build, before the new version starts, with its artifact and env; a throw fails
   * the deployment with the error's message and the running version keeps serving.
   */
  beforeStart?(context: DeployHookContext, build: { artifactDir: string; env: Readonly<Record<string, string>> }): Promise<void>;
  /** When a deployment failed (its log stored), before it is marked failed; it logs its own errors (a throw is ignored). */
  afterFailure?(context: DeployHookContext, reason: string): Promise<void>;
}

const UNFINISHED = new Set(['queued', 'cloning', 'building', 'starting']);
const BUILD_LOG_MAX_LINES = 20_000;

class DeployFailed extends Error {
  constructor(
    message: string,
    readonly code: FailureCode,
  ) {
    super(message);
  }
}

/** The deployment was cancelled (its row says so): it stops where it is, and nothing is started. */
class DeployCancelled extends Error {}

/**
 * The deploy pipeline: checkout of the commit (git host port) → build decision → install and build
 * in the sandbox → the artifact (the built folder, without .git) → runtime.deploy, healthy → the
 * route switched (the runtime's onChange, followed by AppsHost) → `live`, the previous live one
 * `retired`. Each phase's time is recorded; a failure marks the deployment `failed` with the reason
 * and leaves the running version serving. The build log is kept as a blob.
 */
export function buildHandler(deps: PipelineDeps): QueueDefinition {
  return buildQueue.handle((job) => runDeployment(deps, job));
}

async function runDeployment(deps: PipelineDeps, job: Job<{ deploymentId: string }>): Promise<void> {
  const { store } = deps;
  const deployment = await store.deploymentById(job.payload.deploymentId);
  if (!deployment || !UNFINISHED.has(deployment.status)) return;
  const service = await store.serviceById(deployment.serviceId);
  const app = service ? await store.appById(service.appId) : null;
  if (!service || !app) return;

  const lines: string[] = [];
  // Each line also goes to the running job log: the API on any replica reads it while the build runs.
  const liveLog = deps.jobLogs.writer(buildLogStream(deployment.id), app.organizationId);
  await liveLog.begin();
  const log = (stream: string, line: string) => {
    if (lines.length >= BUILD_LOG_MAX_LINES) return;
    const entry = `${deps.clock().toISOString()} ${stream} ${line}`;
    lines.push(entry);
    liveLog.append(entry);
  };
  const timings: Timings = { clone: null, build: null, deploy: null };
  const workDir = path.join(deps.host.buildDir, 'builds', deployment.id);
  const timed = async <T>(phase: keyof Timings, fn: () => Promise<T>): Promise<T> => {
    const started = performance.now();
    try {
      return await fn();
    } finally {
      timings[phase] = Math.round(performance.now() - started);
      await store.update(deployment.id, { timings: { ...timings } });
    }
  };
  await store.update(deployment.id, { startedAt: deps.clock(), failureReason: null, failureCode: null });
  // The log is stored before the deployment is marked finished, so whoever sees it finished can read it.
  const saveLog = async () => {
    // Followers read every line from the running log before it is replaced by the blob.
    await liveLog.flush();
    const blob = await deps.blobs.put(Readable.from([`${lines.join('\n')}\n`]), { prefix: 'apps-build-logs/', contentType: 'text/plain; charset=utf-8' });
    const previous = (await store.deploymentById(deployment.id))?.logBlob;
    await store.update(deployment.id, { logBlob: blob.key });
    if (previous) await deps.blobs.delete(previous).catch(() => undefined);
  };

  // An interrupted run gives the log up at once: the run taking the job over begins it afresh.
  const abandonLog = () => liveLog.abandon();
  job.signal.addEventListener('abort', abandonLog, { once: true });
  const cancel = deps.cancels.track(deployment.id);
  const signal = AbortSignal.any([job.signal, cancel.signal]);
  const advance = async (status: 'cloning' | 'building' | 'starting') => {
    if (!(await store.advance(deployment.id, status))) throw new DeployCancelled('cancelled');
  };
  try {
    let artifactDir = deployment.artifactDir;
    let startCommand = deployment.startCommand;
    if (artifactDir === null) {
      ({ artifactDir, startCommand } = await build(deps, { deployment, app, workDir, log, timed, signal, advance }));
    } else {
      log('build', `reusing the build of deployment ${deployment.rollbackOf ?? deployment.id}: nothing is built`);
    }
    if (!startCommand) throw new DeployFailed('the build decided no start command', 'build_refused');

    await advance('starting');
    log('build', `starting: ${startCommand}`);
    const env = await deps.runtimeEnv.of(service.id);
    const hookContext: DeployHookContext = { deployment, service, app, log };
    await timed('deploy', async () => {
      if (deps.hooks?.beforeStart) {
        try {
          await deps.hooks.beforeStart(hookContext, { artifactDir: artifactDir!, env });
        } catch (error) {
          if (job.signal.aborted) throw error;
          throw new DeployFailed(error instanceof Error ? error.message : String(error), 'release_failed');
        }
      }
      try {
        await deps.host.runtime().deploy({ serviceId: service.id, deploymentId: deployment.id, artifactDir: artifactDir!, startCommand: startCommand!, env });
      } catch (error) {
        if (error instanceof HealthFailure) {
          for (const line of error.lastLines) log('app', line);
          throw new DeployFailed(`health check failed: ${error.probe}`, 'health_check_failed');
        }
        if (error instanceof RuntimeError) throw new DeployFailed(`the runtime refused: ${error.message} (${error.code})`, 'runtime_refused');
        throw error;
      }
    });
    await deps.host.settled();
    log('build', 'live');
    await saveLog();
    await store.update(deployment.id, { status: 'live', finishedAt: deps.clock() });
    await store.retireOthers(service.id, deployment.id);
    await store.setDesired(service.id, 'running');
    await store.setAppStatus(app.id, 'live', deps.clock());
    await pruneArtifacts(deps, service.id);
  } catch (error) {
    if (error instanceof DeployCancelled || cancel.signal.aborted) {
      // The row is cancelled already (the cancel wrote it); what ran is killed, the live version serves on.
      log('build', 'cancelled: the deployment was cancelled; the live version keeps serving');
      await saveLog();
      return;
    }
    if (!(error instanceof DeployFailed) && !(error instanceof BuildStepFailed)) {
      // An interruption (lease lost, shutdown) runs again; anything else is this deployment's failure.
      if (job.signal.aborted) throw error;
    }
    if ((await store.deploymentById(deployment.id))?.status === 'cancelled') {
      log('build', 'cancelled: the deployment was cancelled; the live version keeps serving');
      await saveLog();
      return;
    }
    const reason = error instanceof Error ? error.message : String(error);
    const code: FailureCode = error instanceof DeployFailed || error instanceof BuildStepFailed ? error.code : 'deploy_failed';
    log('build', `failed: ${reason}`);
    await saveLog();
    // Before the deployment is marked failed: whoever sees it failed finds its mail sent.
    await deps.hooks?.afterFailure?.({ deployment, service, app, log }, reason).catch(() => undefined);
    await store.update(deployment.id, { status: 'failed', failureReason: reason, failureCode: code, finishedAt: deps.clock() });
    const live = (await store.history(service.id)).some((entry) => entry.status === 'live');
    if (!live) await store.setAppStatus(app.id, 'failed', deps.clock());
  } finally {
    cancel.done();
    await rm(workDir, { recursive: true, force: true });
    job.signal.removeEventListener('abort', abandonLog);
    // After the deployment is marked finished (its blob stored before): readers take the blob from now on.
    // An interrupted run leaves the log to the run taking the job over (it may have begun already).
    const now = await store.deploymentById(deployment.id);
    if (!now || !UNFINISHED.has(now.status)) await liveLog.discard();
  }
}

interface BuildContext {
  deployment: DeploymentRecord;
  app: { organizationId: string; sourceKind: string; sourceRepo: string | null; sourceUrl: string | null; branch: string; rootDir: string | null; startCommand: string | null };
  workDir: string;
  log: (stream: string, line: string) => void;
  timed: <T>(phase: keyof Timings, fn: () => Promise<T>) => Promise<T>;
  signal: AbortSignal;
  /** Moves the deployment to a phase; throws when it was cancelled meanwhile. */
  advance: (status: 'cloning' | 'building') => Promise<void>;
}

async function build(deps: PipelineDeps, context: BuildContext): Promise<{ artifactDir: string; startCommand: string | null }> {
  const { store, config } = deps;
  const { deployment, app, workDir, log, timed } = context;
  const source = path.join(workDir, 'src');
  await rm(workDir, { recursive: true, force: true });
  await mkdir(workDir, { recursive: true });

  await context.advance('cloning');
  const from = sourceOf(app);
  // A githost deployment names its commit; a URL is cloned at its branch's head again; a template is copied.
  const ref = from.kind === 'githost' ? (deployment.commitSha ?? from.branch) : null;
  const { commit } = await timed('clone', async () => {
    log('build', `checking out ${from.kind === 'githost' ? from.repo : from.kind === 'url' ? new URL(from.url).origin : from.template}@${ref ?? app.branch}`);
    try {
      return await checkoutSource(deps.sources, app.organizationId, from, source, { ref, signal: context.signal });
    } catch (error) {
      if (context.signal.aborted) throw error;
      throw new DeployFailed(`checkout failed: ${error instanceof Error ? error.message : String(error)}`, 'checkout_failed');
    }
  });
  if (deployment.commitSha !== commit) await store.update(deployment.id, { commitSha: commit });

  await context.advance('building');
  return timed('build', async () => {
    const result = await decideBuild(await SourceTree.open(source), {
      ...(app.rootDir !== null ? { rootDir: app.rootDir } : {}),
      overrides: app.startCommand !== null ? { startCommand: app.startCommand } : {},
    });
    if (!result.ok) throw new DeployFailed(`the build decision refused: ${result.error.message} (${result.error.code})`, 'build_refused');
    const { decision } = result;
    await store.update(deployment.id, { decision: decision as unknown as Record<string, unknown> });
    const staticRoot = decision.staticRoot?.value ?? null;
    const start = decision.start.value ?? (staticRoot === null ? '-' : `static files of ${staticRoot}`);
    const commands = `install ${decision.install.value ?? '-'}, build ${decision.build.value ?? '-'}, start ${start}`;
    log('build', `${decision.provider} app in ${decision.rootDir.value}: ${commands}`);
    if (decision.start.value === null && staticRoot === null) {
      throw new DeployFailed('the build decided no start command', 'build_refused');
    }
    const appDir = path.join(source, decision.rootDir.value === '.' ? '' : (decision.rootDir.value ?? ''));
    const started = Date.now();
    const tools = deps.host.runtime().tools;
    const steps = (
      [
        ['install', decision.install.value],
        ['build', decision.build.value],
      ] as const
    ).filter((step): step is readonly ['install' | 'build', string] => step[1] !== null);
    const network = await buildNetwork(deps, { workDir, sandboxed: tools.bwrap !== null, deploymentId: deployment.id, log });
    try {
      // Run as root, the build's folder is handed to its uid: the process cap counts per uid, never for root.
      if (network.uid !== null) await execFileAsync('chown', ['-R', `${network.uid}:${network.uid}`, workDir]);
      for (const [name, command] of steps) {
        const left = config.build.timeoutMs - (Date.now() - started);
        await runBuildStep(
          tools,
          {
            name,
            command,
            appDir,
            scratchDir: scratchOf(workDir),
            env: network.env,
            timeoutMs: Math.max(1, left),
            memoryBytes: config.build.memoryBytes,
            processes: config.build.processes,
            uid: network.uid,
            registryProxy: network.registryProxy,
            signal: context.signal,
          },
          log,
        );
      }
    } finally {
      await network.close();
    }
    // The artifact is the built folder as it is, without the checkout's .git.
    const artifactDir = path.join(deps.host.buildDir, 'artifacts', deployment.id);
    await rm(artifactDir, { recursive: true, force: true });
    await mkdir(path.dirname(artifactDir), { recursive: true, mode: 0o755 });
    let startCommand = decision.start.value;
    if (staticRoot !== null) {
      // A static site (or a front end's build output): the folder and the static file server, self-contained.
      const label = staticRoot === '.' ? decision.rootDir.value! : staticRoot;
      const host = config.runtime.provider === 'kubernetes' ? '0.0.0.0' : '127.0.0.1';
      try {
        startCommand = await assembleStaticSite({ servedDir: path.join(appDir, staticRoot), label, artifactDir, host });
      } catch (error) {
        if (error instanceof StaticSiteMissing) throw new DeployFailed(error.message, 'build_failed');
        throw error;
      }
      log('build', `static site: ${label}/ served by the static file server`);
    } else {
      const filter = (from: string) => from !== path.join(appDir, '.git');
      await cp(appDir, artifactDir, { recursive: true, verbatimSymlinks: true, filter });
    }
    // Private, as everything in the data directory is; the runtime hands it to the app's uid at each start.
    await execFileAsync('chmod', ['-R', 'go-rwx', artifactDir]);
    const size = await sizeOf(artifactDir);
    await store.update(deployment.id, { artifactDir, startCommand, imageSizeBytes: size });
    log('build', `artifact: ${size} bytes`);
    return { artifactDir, startCommand };
  });
}

interface BuildNetwork {
  env: Record<string, string>;
  uid: number | null;
  registryProxy: { socketPath: string; nodePath: string } | null;
  close(): Promise<void>;
}

/**
 * The network a build's steps get: in the sandbox none but the registry proxy (registry-proxy.ts),
 * started for this build on a socket in its work dir; npm and pip pointed at the configured
 * registries. Without bwrap nothing can take the network away: the log says so.
 */
async function buildNetwork(deps: PipelineDeps, context: { workDir: string; sandboxed: boolean; deploymentId: string; log: (stream: string, line: string) => void }): Promise<BuildNetwork> {
  const { build } = deps.config;
  // No audit or funding calls: an install asks the registry for packages and nothing else.
  const registries = { npm_config_registry: build.npmRegistry, PIP_INDEX_URL: build.pypiIndex, npm_config_audit: 'false', npm_config_fund: 'false' };
  if (!context.sandboxed) {
    context.log('build', 'no sandbox (bwrap missing): install reaches the network unrestricted');
    return { env: registries, uid: null, registryProxy: null, close: async () => undefined };
  }
  const proxy = await startRegistryProxy({
    socketPath: path.join(context.workDir, 'registry.sock'),
    registries: build.registries,
    allowPrivate: deps.allowPrivateNetwork,
    log: (line) => context.log('proxy', line),
  });
  const uid = process.getuid?.() === 0 ? build.uidBase + (createHash('sha256').update(context.deploymentId).digest().readUInt32BE(0) % 1000) : null;
  context.log('build', `network: only ${build.registries.map(registryAuthority).join(', ')} (through the registry proxy)`);
  return {
    env: { ...registries, ...proxyEnv() },
    uid,
    registryProxy: { socketPath: path.join(context.workDir, 'registry.sock'), nodePath: process.execPath },
    close: () => proxy.close(),
  };
}

async function sizeOf(dir: string): Promise<number> {
  let total = 0;
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) total += await sizeOf(full);
    else if (entry.isFile()) total += (await stat(full)).size;
  }
  return total;
}

/** Artifacts no rollback can name any more (past the history of 20) are removed from disk. */
async function pruneArtifacts(deps: PipelineDeps, serviceId: string): Promise<void> {
  for (const { id, artifactDir } of await deps.store.artifactsPastHistory(serviceId)) {
    await rm(artifactDir, { recursive: true, force: true });
    await deps.store.update(id, { artifactDir: null });
  }
}
