import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { tmpdir } from 'node:os';

/**
 * How this plugin runs the system's git: always in a process group of its own (so a timeout or an
 * abort kills git and every helper it started, such as a remote-https or pack-objects), with an
 * environment that reads no system or user configuration, never prompts, and runs no hooks.
 */

/** The Debian package that provides `git`, named by the boot check. */
export const GIT_PACKAGE = 'git';

/** Whether `git` runs from PATH (the boot check): `git --version` exits 0. */
export function gitIsAvailable(path = process.env.PATH ?? ''): boolean {
  const probe = spawnSync('git', ['--version'], { env: { PATH: path }, stdio: 'ignore', timeout: 10_000 });
  return probe.error === undefined && probe.status === 0;
}

/**
 * The environment of every git this plugin runs: nothing inherited but PATH, no system or global
 * configuration (an operator's ~/.gitconfig could name hooks, credential helpers or proxies), no
 * terminal prompt, and a C locale so the messages read the same everywhere.
 */
export function gitEnvironment(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  return {
    PATH: process.env.PATH ?? '/usr/bin:/bin',
    HOME: tmpdir(),
    LANG: 'C',
    LC_ALL: 'C',
    GIT_CONFIG_NOSYSTEM: '1',
    GIT_CONFIG_GLOBAL: '/dev/null',
    GIT_TERMINAL_PROMPT: '0',
    ...extra,
  };
}

/** Settings given as `-c` to every git run: hooks never run, whatever a repository says. */
export const NO_HOOKS = ['-c', 'core.hooksPath=/dev/null'];

export type GitFailure = 'exit' | 'timeout' | 'aborted' | 'too_large' | 'spawn';

/** A git run that did not succeed. `detail` is git's last words, already scrubbed by the caller's `redact`. */
export class GitCommandError extends Error {
  readonly reason: GitFailure;
  readonly detail: string;

  constructor(reason: GitFailure, message: string, detail = '') {
    super(message);
    this.name = 'GitCommandError';
    this.reason = reason;
    this.detail = detail;
  }
}

/** Starts git in a process group of its own (detached), so `killGroup` reaches everything it started. */
export function spawnGit(args: readonly string[], options: { cwd?: string; env: NodeJS.ProcessEnv }): ChildProcess {
  return spawn('git', args, { cwd: options.cwd, env: options.env, detached: true, stdio: ['pipe', 'pipe', 'pipe'] });
}

/** Kills a git started by `spawnGit` and its whole process group; a group already gone is no error. */
export function killGroup(child: ChildProcess): void {
  if (child.pid === undefined || child.exitCode !== null || child.signalCode !== null) return;
  try {
    process.kill(-child.pid, 'SIGKILL');
  } catch {
    // Already exited between the check and the kill.
  }
}

export interface GitRunOptions {
  cwd?: string;
  env?: Record<string, string>;
  timeoutMs: number;
  signal?: AbortSignal;
  /** Most bytes of stdout kept; past it the run is killed as too_large. Default 1 MiB. */
  maxStdoutBytes?: number;
  /** Scrubs what git printed before it goes into an error (a URL, a token). */
  redact?: (text: string) => string;
  /** Checked while the run goes on; answering true kills it as too_large (a clone filling the disk). */
  overLimit?: () => Promise<boolean>;
  overLimitEveryMs?: number;
  /** What the error message calls this run, e.g. "git clone". Never the argv, which may hold a URL. */
  what: string;
}

const STDERR_KEPT = 4096;

/** Runs git to its end and answers its stdout; any failure is a GitCommandError. */
export function runGit(args: readonly string[], options: GitRunOptions): Promise<string> {
  const redact = options.redact ?? ((text: string) => text);
  const maxStdout = options.maxStdoutBytes ?? 1024 * 1024;
  return new Promise((resolve, reject) => {
    if (options.signal?.aborted) {
      reject(new GitCommandError('aborted', `${options.what} was cancelled`));
      return;
    }
    const child = spawnGit(args, { cwd: options.cwd, env: gitEnvironment(options.env) });
    child.stdin?.end();
    const stdout: Buffer[] = [];
    let stdoutBytes = 0;
    let stderr = '';
    let failure: GitCommandError | null = null;
    const fail = (error: GitCommandError) => {
      failure ??= error;
      killGroup(child);
    };
    child.stdout?.on('data', (chunk: Buffer) => {
      stdoutBytes += chunk.length;
      if (stdoutBytes > maxStdout) fail(new GitCommandError('too_large', `${options.what} printed more than ${maxStdout} bytes`));
      else stdout.push(chunk);
    });
    child.stderr?.on('data', (chunk: Buffer) => {
      stderr = (stderr + chunk.toString('utf8')).slice(-STDERR_KEPT);
    });
    const timer = setTimeout(() => fail(new GitCommandError('timeout', `${options.what} took longer than ${options.timeoutMs} ms`)), options.timeoutMs);
    const onAbort = () => fail(new GitCommandError('aborted', `${options.what} was cancelled`));
    options.signal?.addEventListener('abort', onAbort, { once: true });
    let watching: NodeJS.Timeout | null = null;
    if (options.overLimit) {
      const check = options.overLimit;
      watching = setInterval(() => {
        check().then(
          (over) => {
            if (over) fail(new GitCommandError('too_large', `${options.what} exceeded its size limit`));
          },
          () => undefined,
        );
      }, options.overLimitEveryMs ?? 250);
    }
    child.on('error', (error) => fail(new GitCommandError('spawn', `${options.what} could not start: ${error.message}`)));
    child.on('close', async (code) => {
      clearTimeout(timer);
      if (watching) clearInterval(watching);
      options.signal?.removeEventListener('abort', onAbort);
      // A last look: a clone that finished between two checks may still have passed its limit.
      if (failure === null && code === 0 && options.overLimit && (await options.overLimit().catch(() => false))) {
        failure = new GitCommandError('too_large', `${options.what} exceeded its size limit`);
      }
      if (failure) {
        reject(new GitCommandError(failure.reason, failure.message, redact(lastLine(stderr))));
        return;
      }
      if (code !== 0) {
        const detail = redact(lastLine(stderr));
        reject(new GitCommandError('exit', `${options.what} failed${detail ? `: ${detail}` : ''}`, detail));
        return;
      }
      resolve(Buffer.concat(stdout).toString('utf8'));
    });
  });
}

/** git's last non-empty line (its `fatal:` line), the one that says why. */
function lastLine(text: string): string {
  const lines = text
    .split(/\r?\n|\r/)
    .map((line) => line.trim())
    .filter(Boolean);
  return lines.at(-1) ?? '';
}
