import { spawn } from 'node:child_process';
import { mkdir } from 'node:fs/promises';
import path from 'node:path';
import { signalTree } from './runtime/processes.ts';
import { DEFAULT_LIMITS } from './runtime/index.ts';
import { type SandboxTools, sandboxCommand } from './runtime/sandbox.ts';

/**
 * Runs a deploy's install and build commands in the app's folder, in the same sandbox the runtime
 * starts apps in (runtime/sandbox.ts), but with the folder bound writable: a build writes its output
 * there. The network is shared (bwrap unshares none here), so install reaches any registry: the
 * allow-listing proxy for package registries is not built yet (README: not yet).
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
  signal?: AbortSignal;
}

export type BuildLog = (stream: 'stdout' | 'stderr' | 'build', line: string) => void;

export class BuildStepFailed extends Error {
  constructor(message: string) {
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
    limits: { ...DEFAULT_LIMITS, memoryBytes: step.memoryBytes },
    unsandboxedHome: step.scratchDir,
    writableApp: true,
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
  const child = spawn(command.file, command.args, { cwd: command.cwd, env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
  for (const [stream, source] of [
    ['stdout', child.stdout],
    ['stderr', child.stderr],
  ] as const) {
    let rest = '';
    source.setEncoding('utf8');
    source.on('data', (chunk: string) => {
      const lines = (rest + chunk).split('\n');
      rest = lines.pop() ?? '';
      for (const line of lines) log(stream, line);
    });
    source.on('end', () => {
      if (rest) log(stream, rest);
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
  if (timedOut) throw new BuildStepFailed(`${step.name} did not finish within ${Math.round(step.timeoutMs / 1000)}s (build timeout)`);
  if (code !== 0) throw new BuildStepFailed(`${step.name} (${step.command}) failed with ${code === null ? `signal ${signal}` : `exit code ${code}`}`);
}

export function scratchOf(workDir: string): string {
  return path.join(workDir, 'home');
}
