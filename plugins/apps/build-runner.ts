import { spawn } from 'node:child_process';
import { mkdir } from 'node:fs/promises';
import path from 'node:path';
import { signalTree } from './runtime/processes.ts';
import { DEFAULT_LIMITS } from './runtime/index.ts';
import { type SandboxTools, sandboxCommand } from './runtime/sandbox.ts';

/**
 * Runs a deploy's install and build commands in the app's folder, in the same sandbox the runtime
 * starts apps in (runtime/sandbox.ts), but with the folder bound writable: a build writes its output
 * there. With `registryProxy` the network is unshared and the registry proxy's socket is the only
 * way out (registry-proxy.ts); run as root, the step runs as `uid`, so the process cap holds.
 */
export interface BuildStep {
  /** `install` or `build`: names the step in the log. */
  name: string;
  command: string;
  appDir: string;
  /** Writable scratch HOME without a sandbox (npm's cache). */
  scratchDir: string;
  env: Readonly<Record<string, string>>;
  timeoutMs: number;
  memoryBytes: number;
  /** Processes (and threads) the step's uid may have: a fork bomb fails to fork past it. */
  processes?: number;
  /** The uid the step runs as (null: the host's). */
  uid?: number | null;
  /** The registry proxy's socket and the node that bridges to it inside the sandbox. */
  registryProxy?: { socketPath: string; nodePath: string } | null;
  signal?: AbortSignal;
}

/** Why a step failed, as the deployment's `failureCode`. */
export type BuildFailureCode = 'build_failed' | 'build_timeout' | 'build_memory';

export type BuildLog = (stream: 'stdout' | 'stderr' | 'build', line: string) => void;

export class BuildStepFailed extends Error {
  constructor(
    message: string,
    readonly code: BuildFailureCode = 'build_failed',
  ) {
    super(message);
    this.name = 'BuildStepFailed';
  }
}

/** Resolves when the command exits 0; throws BuildStepFailed (exit code, timeout) otherwise. */
export async function runBuildStep(tools: SandboxTools, step: BuildStep, log: BuildLog): Promise<void> {
  await mkdir(step.scratchDir, { recursive: true });
  const command = sandboxCommand({
    tools,
    artifactDir: step.appDir,
    command: step.command,
    limits: { ...DEFAULT_LIMITS, memoryBytes: step.memoryBytes, ...(step.processes ? { processes: step.processes } : {}) },
    unsandboxedHome: step.scratchDir,
    writableApp: true,
    uid: tools.bwrap ? (step.uid ?? null) : null,
    registryProxy: tools.bwrap ? (step.registryProxy ?? null) : null,
  });
  const env: Record<string, string> = {
    PATH: '/usr/local/bin:/usr/bin:/bin',
    ...step.env,
    HOME: command.home,
    TMPDIR: tools.bwrap ? '/tmp' : step.scratchDir,
    CI: 'true',
    npm_config_update_notifier: 'false',
  };
  log('build', `$ ${step.command}`);
  let outOfMemory = false;
  const child = spawn(command.file, command.args, { cwd: command.cwd, env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
  for (const [stream, source] of [
    ['stdout', child.stdout],
    ['stderr', child.stderr],
  ] as const) {
    let rest = '';
    source.setEncoding('utf8');
    const line = (text: string) => {
      if (!outOfMemory && OUT_OF_MEMORY.test(text)) outOfMemory = true;
      log(stream, text);
    };
    source.on('data', (chunk: string) => {
      const lines = (rest + chunk).split('\n');
      rest = lines.pop() ?? '';
      for (const each of lines) line(each);
    });
    source.on('end', () => {
      if (rest) line(rest);
    });
  }
  let timedOut = false;
  const kill = () => {
    if (child.pid !== undefined) void signalTree(child.pid, 'SIGKILL').catch(() => undefined);
  };
  const timer = setTimeout(() => {
    timedOut = true;
    kill();
  }, step.timeoutMs);
  step.signal?.addEventListener('abort', kill, { once: true });
  const [code, signal] = await new Promise<[number | null, string | null]>((resolve, reject) => {
    child.once('error', reject);
    child.once('close', (exitCode, exitSignal) => resolve([exitCode, exitSignal]));
  }).finally(() => {
    clearTimeout(timer);
    step.signal?.removeEventListener('abort', kill);
  });
  if (timedOut) throw new BuildStepFailed(`${step.name} did not finish within ${Math.round(step.timeoutMs / 1000)}s (build timeout)`, 'build_timeout');
  if (code === 0) return;
  const how = code === null ? `signal ${signal}` : `exit code ${code}`;
  if (outOfMemory) {
    const cap = Math.round(step.memoryBytes / 1024 / 1024);
    throw new BuildStepFailed(`${step.name} (${step.command}) ran out of memory under the build's ${cap} MiB cap (${how})`, 'build_memory');
  }
  throw new BuildStepFailed(`${step.name} (${step.command}) failed with ${how}`);
}

/**
 * What a process prints when an allocation failed under the memory cap (prlimit --data): the
 * kernel refuses the mapping (ENOMEM) rather than killing anything, so the step's own output is the
 * evidence: node's and V8's fatal errors, C++'s bad_alloc, Python's MemoryError, libc's message.
 */
const OUT_OF_MEMORY = /JavaScript heap out of memory|Fatal process out of memory|allocation failed|std::bad_alloc|\bMemoryError\b|Cannot allocate memory|ENOMEM|out of memory/i;

export function scratchOf(workDir: string): string {
  return path.join(workDir, 'home');
}
