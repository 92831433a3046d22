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
  /**
   * A build's network: none but the registry proxy (../registry-proxy.ts). bwrap unshares
   * the network (only a loopback of its own is left), binds the proxy's socket in and starts the
   * bridge (node) that forwards 127.0.0.1:PROXY_PORT to it; the bridge runs the capped command.
   * Ignored without bwrap: nothing can take the network away there.
   */
  registryProxy?: { socketPath: string; nodePath: string } | null;
}

/** The port the bridge listens on inside the sandbox (its own network namespace: no clash with anything). */
export const PROXY_PORT = 3128;
/** Where the proxy's socket appears inside the sandbox. */
export const PROXY_SOCKET_IN_SANDBOX = '/run/registry-proxy.sock';

/**
 * Run by node inside the sandbox: `node -e BRIDGE_SCRIPT -- SOCKET PORT COMMAND…`. Listens on
 * 127.0.0.1:PORT, pipes every connection to the unix socket, then runs the command with inherited
 * stdio and exits as it did (128 + signal number when a signal ended it).
 */
export const BRIDGE_SCRIPT = [
  "const net=require('net'),{spawn}=require('child_process'),os=require('os');",
  'const [sock,port,...cmd]=process.argv.slice(1);',
  'const server=net.createServer((c)=>{const u=net.connect(sock);const end=()=>{c.destroy();u.destroy()};',
  "c.on('error',end);u.on('error',end);c.pipe(u).pipe(c)});",
  "server.listen(Number(port),'127.0.0.1',()=>{const child=spawn(cmd[0],cmd.slice(1),{stdio:'inherit'});",
  "child.on('error',(e)=>{console.error(String(e));process.exit(127)});",
  "child.on('exit',(code,signal)=>process.exit(code===null?128+(os.constants.signals[signal]||1):code))});",
].join('');

/** util-linux's setpriv: drops to the app's uid inside the sandbox, once bwrap has bound its folders. */
export const SETPRIV = '/usr/bin/setpriv';

export function sandboxKind(tools: SandboxTools): SandboxKind {
  return tools.bwrap ? 'bwrap' : 'none';
}

export function sandboxCommand(spec: SandboxSpec): SandboxCommand {
  const { tools, limits } = spec;
  const caps = [
    // Private writable memory (RLIMIT_DATA: heap and anonymous mappings), not address space
    // (RLIMIT_AS): runtimes reserve far more address space than they use (node's fetch instantiates
    // WebAssembly, whose memory reserves ~10 GiB of guard pages), so an address-space cap breaks
    // ordinary apps while this one still stops a process from taking more memory than it is given.
    `--data=${limits.memoryBytes}`,
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
  const proxy = spec.registryProxy ?? null;
  const network = proxy
    ? [
        '--unshare-net',
        ...['--bind', proxy.socketPath, PROXY_SOCKET_IN_SANDBOX],
        // node lives outside the system folders on some hosts (nvm): bound where it is, read-only.
        ...(SYSTEM_BINDS.some((folder) => proxy.nodePath.startsWith(`${folder}/`)) ? [] : ['--ro-bind', proxy.nodePath, proxy.nodePath]),
      ]
    : [];
  const bwrap = [
    tools.bwrap,
    ...binds,
    ...[spec.writableApp ? '--bind' : '--ro-bind', spec.artifactDir, APP_DIR],
    ...['--proc', '/proc', '--dev', '/dev'],
    // Writable by the app's uid as well as the host's: both are fresh, private to this sandbox.
    ...['--perms', '1777', '--tmpfs', '/tmp', '--perms', '1777', '--tmpfs', APP_HOME, '--chdir', APP_DIR],
    ...['--unshare-pid', '--unshare-ipc', '--unshare-uts', '--hostname', 'app'],
    ...['--die-with-parent', '--new-session'],
    ...network,
    '--',
  ];
  if (proxy) {
    // The bridge is the service's own code: outside the caps (which are the app's, not its own),
    // it runs the capped command: bridge → prlimit → setpriv → the command.
    const bridge = ['/usr/bin/env', '-u', 'NODE_OPTIONS', proxy.nodePath, '-e', BRIDGE_SCRIPT, '--', PROXY_SOCKET_IN_SANDBOX, String(PROXY_PORT)];
    return { file: tools.bwrap, args: [...bwrap.slice(1), ...bridge, tools.prlimit, ...caps, '--', ...dropPrivileges, ...shell], cwd: '/', home: APP_HOME };
  }
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
