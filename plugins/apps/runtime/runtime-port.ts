/**
 * The runtime port: how the apps plugin runs what a deploy built, after Dokku's scheduler interface
 * (deploy, stop, start, logs, run, retire, status). `local` (local-runtime.ts) runs apps as
 * sandboxed processes on this machine; a `kubernetes` runtime will implement the same interface
 * (README.md: what it needs). Nothing here names a process, a pid namespace or a port range: those
 * are the local runtime's; `Instance.pid` is null where there is no local process.
 */

/** Caps an app runs under. Every field is optional: the runtime's configured defaults fill the rest. */
export interface RuntimeLimits {
  /** Address space (local) or memory limit (kubernetes), in bytes. */
  memoryBytes?: number;
  /** Processes and threads the app may have at once: what contains a fork bomb. */
  processes?: number;
  openFiles?: number;
  /** CPU time, in seconds, before the kernel ends the process (local); a CPU quota elsewhere. */
  cpuSeconds?: number;
}

export interface DeployRequest {
  serviceId: string;
  deploymentId: string;
  /** The built app, as the build left it: bound read-only; on a root host, handed to the instance's uid (chown) before it starts. */
  artifactDir: string;
  /** A shell command run in artifactDir (`node server.js`, `./app`). */
  startCommand: string;
  /** The app's variables; the runtime adds PORT (and HOME, and PATH when absent). */
  env: Readonly<Record<string, string>>;
  limits?: RuntimeLimits;
}

/**
 * How an instance is isolated: `bwrap` namespaces, none (a warning; refused under requireSandbox), or
 * a `container` (the kubernetes runtime's pods).
 */
export type SandboxKind = 'bwrap' | 'none' | 'container';

export interface Instance {
  serviceId: string;
  deploymentId: string;
  /** The process the runtime started (the sandbox's outer process, leader of its group); null off-machine. */
  pid: number | null;
  port: number;
  /** What the proxy forwards to: `127.0.0.1:PORT`. */
  target: string;
  startedAt: string;
  /** Restarts after crashes since the deploy. */
  restarts: number;
  sandbox: SandboxKind;
}

export type ServiceState = 'starting' | 'running' | 'crashed' | 'stopped';

export interface ServiceStatus {
  serviceId: string;
  state: ServiceState;
  /** The deployment that should run (the last one deployed healthy), or null. */
  deploymentId: string | null;
  instances: Instance[];
}

/** Which address serves a service now; null while nothing does (stopped, crashed, restarting). */
export interface RouteChange {
  serviceId: string;
  deploymentId: string | null;
  target: string | null;
}

/** Lifecycle facts beside the routes, for the apps plugin's records and events. */
export type RuntimeEvent =
  /**
   * An instance's process began (a deploy, a restart after a crash, a restore at boot); `instance`
   * names it until its `exited`; `memoryBytes` is the memory cap it runs under (what hosting bills).
   */
  | { kind: 'started'; serviceId: string; deploymentId: string; instance: string; memoryBytes: number }
  | { kind: 'exited'; serviceId: string; deploymentId: string; instance: string; code: number | null; signal: string | null }
  | { kind: 'restarting'; serviceId: string; deploymentId: string; attempt: number; inMs: number }
  | { kind: 'crashed'; serviceId: string; deploymentId: string; crashes: number; windowMs: number }
  | { kind: 'health_failed'; serviceId: string; deploymentId: string; probe: string };

export type LogStream = 'stdout' | 'stderr' | 'runtime';

export interface LogLine {
  at: string;
  deploymentId: string;
  stream: LogStream;
  line: string;
}

export interface LogOptions {
  /** Only lines at or after this instant. */
  since?: Date;
  /** Keep yielding new lines as they come, until the consumer stops iterating or `signal` aborts. */
  follow?: boolean;
  /** Ends a followed read (the reader went away) even while no line comes. */
  signal?: AbortSignal;
}

export interface RunOptions {
  timeoutMs: number;
  /**
   * The build to run beside instead of the service's current one: a release command runs against a
   * deployment's artifact and env before that deployment starts (a service never deployed has none).
   */
  build?: Pick<DeployRequest, 'deploymentId' | 'artifactDir' | 'env' | 'limits'>;
}

export interface RunResult {
  /** Null when a signal ended it (a timeout: SIGKILL). */
  exitCode: number | null;
  signal: string | null;
  timedOut: boolean;
  /** stdout and stderr interleaved as they came, cut at the runtime's output cap. */
  output: string;
}

export type Unsubscribe = () => void;

/** The `usage/sample` capability: what one running instance uses now. */
export interface InstanceUsage {
  serviceId: string;
  deploymentId: string;
  /** Names this started process among all others (a restart is another instance): `<pid>@<startedAt>` locally. */
  instance: string;
  startedAt: string;
  /** Resident memory of the instance (its whole process tree). */
  memoryBytes: number;
  /** CPU time the instance used since it started, in ms (grows; a new instance starts again from 0). */
  cpuMs: number;
  processes: number;
}

export interface RuntimePort {
  /** Resolves once the new instance is healthy and routed; the previous one is then retired. */
  deploy(request: DeployRequest): Promise<Instance>;
  /** Stops the service's instances; it stays stopped (across restarts of the host) until `start`. */
  stop(serviceId: string): Promise<void>;
  /** Runs the last deployed artifact again, healthy as `deploy` is. */
  start(serviceId: string): Promise<Instance>;
  /** Stops a deployment's instances and forgets it; a retired current deployment leaves the service stopped. */
  retire(deploymentId: string): Promise<void>;
  status(serviceId: string): Promise<ServiceStatus>;
  logs(serviceId: string, options?: LogOptions): AsyncIterable<LogLine>;
  /** Starts the service's log afresh: the current file is rotated (its lines stay readable in the older generations). */
  rotateLogs(serviceId: string): void;
  /** A one-off command beside the app: its artifact, env and sandbox (or `options.build`'s), no PORT of its own. */
  run(serviceId: string, command: string, options: RunOptions): Promise<RunResult>;
  /** What every instance this runtime runs uses now (the usage sampler reads it periodically). */
  usage(): Promise<InstanceUsage[]>;
  onChange(listener: (change: RouteChange) => void): Unsubscribe;
  onEvent(listener: (event: RuntimeEvent) => void): Unsubscribe;
}

/** The health gate's refusal: the probe that failed, what became of the process, its last lines. */
export class HealthFailure extends Error {
  override readonly name = 'HealthFailure';
  constructor(
    readonly serviceId: string,
    readonly deploymentId: string,
    /** `nothing listening on PORT=20001 after 30s`, `process exited with code 1 before listening on PORT=…`. */
    readonly probe: string,
    readonly exitCode: number | null,
    readonly signal: string | null,
    readonly lastLines: readonly string[],
  ) {
    super(`deployment ${deploymentId} is not healthy: ${probe}`);
  }
}

/** Why the runtime refuses before starting anything. */
export type RuntimeRefusal = 'sandbox_required' | 'no_free_port' | 'nothing_deployed' | 'unknown_service';

export class RuntimeError extends Error {
  override readonly name = 'RuntimeError';
  constructor(
    readonly code: RuntimeRefusal,
    message: string,
  ) {
    super(message);
  }
}
