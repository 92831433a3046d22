import { constants } from 'node:fs';
import { access } from 'node:fs/promises';
import { type RuntimeLimits, RuntimeError, type SandboxKind } from './runtime-port.ts';

/**
 * The command line an app runs under: `prlimit` caps (inherited by everything the app starts) around
 * `bwrap` (README.md: each flag and why), around `/bin/sh -c START`. Pure: the runtime spawns it.
 */
export interface SandboxTools {
  /** bwrap's path, or null to run without a sandbox. */
  bwrap: string | null;
  prlimit: string;
}

/** System folders bound read-only: the interpreters and their libraries, certificates, resolver files. */
export const SYSTEM_BINDS = ['/usr', '/bin', '/sbin', '/lib', '/lib64', '/etc', '/opt'] as const;

/** Inside the sandbox the app is always here, whatever folder the build left it in. */
export const APP_DIR = '/app';
export const APP_HOME = '/home/app';

export interface SandboxCommand {
  file: string;
  args: string[];
  /** The working folder to spawn in (the artifact without a sandbox; irrelevant inside one). */
  cwd: string;
  /** HOME and TMPDIR as the app sees them. */
  home: string;
}

export interface SandboxSpec {
  tools: SandboxTools;
  artifactDir: string;
  command: string;
  limits: Required<RuntimeLimits>;
  /** Without a sandbox, the writable folder given as HOME and TMPDIR (made by the caller). */
  unsandboxedHome: string;
  /**
   * Bind the folder writable: a build writes its output (node_modules, dist) into it. An app never
   * gets this: it runs from the build's output as it was built.
   */
  writableApp?: boolean;
  /**
   * The uid (and gid) the command runs as, or null for the host's own. The command line starts as the
   * host (bwrap binds folders inside the service's private data directory, which no other uid may
   * enter) and `setpriv` drops to this uid just before the command.
   */
  uid?: number | null;
}

/** util-linux's setpriv: drops to the app's uid inside the sandbox, once bwrap has bound its folders. */
export const SETPRIV = '/usr/bin/setpriv';

export function sandboxKind(tools: SandboxTools): SandboxKind {
  return tools.bwrap ? 'bwrap' : 'none';
}

export function sandboxCommand(spec: SandboxSpec): SandboxCommand {
  const { tools, limits } = spec;
  const caps = [
    `--as=${limits.memoryBytes}`,
    `--nproc=${limits.processes}`,
    `--nofile=${limits.openFiles}`,
    `--cpu=${limits.cpuSeconds}`,
    // No core files: a crashing app would write them into its (read-only) folder or fill the disk.
    '--core=0',
  ];
  // NODE_OPTIONS is dropped on the way in, whoever set it: a host's own node flags (a test runner's
  // loaders, injected into every child's environment) must never reach an app or its build. An app
  // gives node flags in its start command.
  const shell = ['/usr/bin/env', '-u', 'NODE_OPTIONS', '/bin/sh', '-c', spec.command];
  const dropPrivileges = spec.uid == null ? [] : [SETPRIV, `--reuid=${spec.uid}`, `--regid=${spec.uid}`, '--clear-groups', '--'];
  if (!tools.bwrap) {
    // Started as the host in the artifact folder (which it may enter), then the app's uid.
    return { file: tools.prlimit, args: [...caps, '--', ...dropPrivileges, ...shell], cwd: spec.artifactDir, home: spec.unsandboxedHome };
  }
  const binds = SYSTEM_BINDS.flatMap((folder) => ['--ro-bind-try', folder, folder]);
  const bwrap = [
    tools.bwrap,
    ...binds,
    ...[spec.writableApp ? '--bind' : '--ro-bind', spec.artifactDir, APP_DIR],
    ...['--proc', '/proc', '--dev', '/dev'],
    // Writable by the app's uid as well as the host's: both are fresh, private to this sandbox.
    ...['--perms', '1777', '--tmpfs', '/tmp', '--perms', '1777', '--tmpfs', APP_HOME, '--chdir', APP_DIR],
    ...['--unshare-pid', '--unshare-ipc', '--unshare-uts', '--hostname', 'app'],
    ...['--die-with-parent', '--new-session'],
    '--',
  ];
  return { file: tools.prlimit, args: [...caps, '--', ...bwrap, ...dropPrivileges, ...shell], cwd: '/', home: APP_HOME };
}

/** The executable at `candidate`, or null: a missing bwrap means no sandbox, not a failed deploy. */
export async function executableOrNull(candidate: string | null): Promise<string | null> {
  if (!candidate) return null;
  try {
    await access(candidate, constants.X_OK);
    return candidate;
  } catch {
    return null;
  }
}

/**
 * The sandbox tools of this machine (the local runtime's apps and every runtime's builds): bwrap when
 * executable, else a warning, or `sandbox_required` under `requireSandbox`.
 */
export async function resolveSandboxTools(options: { bwrapPath?: string | null; prlimitPath?: string; requireSandbox?: boolean; warn?: (message: string) => void }): Promise<SandboxTools> {
  const bwrap = await executableOrNull(options.bwrapPath === undefined ? '/usr/bin/bwrap' : options.bwrapPath);
  if (!bwrap) {
    const wanted = options.bwrapPath ?? 'bwrap';
    if (options.requireSandbox) {
      throw new RuntimeError('sandbox_required', `apps.requireSandbox is set but ${wanted} is not executable: no app can run`);
    }
    options.warn?.(`${wanted} is not executable: apps run without a sandbox (sandbox: none), as the service's own user, under its caps only`);
  }
  return { bwrap, prlimit: options.prlimitPath ?? '/usr/bin/prlimit' };
}
