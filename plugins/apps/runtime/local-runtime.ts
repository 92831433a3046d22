import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { randomInt } from 'node:crypto';
import { EventEmitter, once } from 'node:events';
import { mkdir } from 'node:fs/promises';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import { healthGate, portIsFree } from './health.ts';
import { LogStore } from './log-store.ts';
import { killOrphanGroup, signalTree, startTicksOf } from './processes.ts';
import {
  type DeployRequest,
  HealthFailure,
  type Instance,
  type InstanceUsage,
  type LogLine,
  type LogOptions,
  type LogStream,
  type RouteChange,
  type RunOptions,
  type RunResult,
  RuntimeError,
  type RuntimeEvent,
  type RuntimeLimits,
  type RuntimePort,
  type SandboxKind,
  type ServiceState,
  type ServiceStatus,
  type Unsubscribe,
} from './runtime-port.ts';
import { FileRuntimeState, type RuntimeState, type ServiceRecord, type StateSealer } from './runtime-state.ts';
import { treeUsage } from './usage.ts';
import { resolveSandboxTools, type SandboxTools, sandboxCommand, sandboxKind } from './sandbox.ts';

const execFileAsync = promisify(execFile);
/** The `local` runtime: apps as sandboxed process groups on this machine (README.md). */
export interface LocalRuntimeOptions {
  /** Logs, the file-backed state and unsandboxed apps' homes live here. */
  stateDir: string;
  /** What should run, across hosts; a JSON file under stateDir by default, its env values sealed by `sealer`. */
  state?: RuntimeState;
  /** Seals the default state file's env values (the secret vault); required unless `state` is given. */
  sealer?: StateSealer;
  /** PORTs handed to apps, on 127.0.0.1 (default 20000–20999). */
  ports?: { first: number; last: number };
  healthTimeoutMs?: number;
  /** Require an HTTP answer to `GET /` after the TCP connect (default true). */
  healthHttp?: boolean;
  /** Between SIGTERM and SIGKILL when an instance is replaced or stopped (default 10 s). */
  stopGraceMs?: number;
  restart?: { maxCrashes?: number; windowMs?: number; backoffMs?: number; maxBackoffMs?: number };
  /** Where bwrap is; null, or a path with nothing executable, runs apps without a sandbox. */
  bwrapPath?: string | null;
  prlimitPath?: string;
  /** Refuse to run anything without bwrap (`apps.requireSandbox`). */
  requireSandbox?: boolean;
  limits?: RuntimeLimits;
  /**
   * Run as root, each instance gets its own uid, `uidBase + (PORT - first)` (one-offs `uidBase +
   * range size`): the kernel ignores the process cap for root, and counts it per uid. Null keeps the
   * host's uid. Ignored when the host is not root.
   */
  uidBase?: number | null;
  logs?: { maxBytes?: number; keep?: number };
  /** Where usage is read from (default /proc; tests hand a folder shaped like it). */
  procRoot?: string;
  /** Where warnings go (the host's logger). */
  warn?: (message: string) => void;
}

export const DEFAULT_LIMITS: Required<RuntimeLimits> = {
  memoryBytes: 4 * 1024 ** 3,
  processes: 256,
  openFiles: 4096,
  cpuSeconds: 24 * 3600,
};

const TAIL_LINES = 20;

/** What names an instance in `started` and `exited`: its deployment, pid and port (a pid is not reused while it lives). */
const instanceName = (live: Live): string => `${live.request.deploymentId}:${live.pid}:${live.port}`;
const RUN_OUTPUT_MAX_CHARS = 1024 * 1024;

/** One started process: a deploy's instance, a restart, or one on its way out. */
interface Live {
  request: DeployRequest;
  port: number;
  child: ChildProcess;
  pid: number;
  startedAt: string;
  restarts: number;
  sandbox: SandboxKind;
  exited: Promise<{ code: number | null; signal: string | null }>;
  /** Set once the runtime ends it: its exit is then no crash. */
  stopping: boolean;
  tail: string[];
  /** Settles once the exit has been handled: logged, unrecorded, and a crash acted on. */
  done: Promise<void>;
}

interface Entry {
  record: ServiceRecord;
  active: Live | null;
  lives: Set<Live>;
  state: ServiceState;
  crashes: number[];
  restartTimer: NodeJS.Timeout | null;
  /** Bumped by deploy, stop and retire: a restart begun before one does not promote itself after it. */
  epoch: number;
}

export class LocalRuntime implements RuntimePort {
  private readonly entries = new Map<string, Entry>();
  private readonly emitter = new EventEmitter().setMaxListeners(0);
  private readonly logStore: LogStore;
  private readonly state: RuntimeState;
  private readonly ports: { first: number; last: number };
  private readonly limits: Required<RuntimeLimits>;
  private readonly restartPolicy: Required<NonNullable<LocalRuntimeOptions['restart']>>;
  private readonly uidBase: number | null;
  private nextPort: number;
  private closed = false;

  private constructor(
    private readonly options: LocalRuntimeOptions,
    readonly tools: SandboxTools,
    records: ServiceRecord[],
  ) {
    this.state = options.state!;
    this.logStore = new LogStore({ dir: path.join(options.stateDir, 'logs'), ...options.logs });
    this.ports = options.ports ?? { first: 20_000, last: 20_999 };
    // A random start in the range: another process handing out the same range (a second service on
    // the machine, tests side by side) walks it from elsewhere, so the free-port check and the app's
    // own listen are not raced by both at the same ports.
    this.nextPort = this.ports.first + randomInt(this.ports.last - this.ports.first + 1);
    this.limits = { ...DEFAULT_LIMITS, ...options.limits };
    this.restartPolicy = { maxCrashes: 5, windowMs: 60_000, backoffMs: 500, maxBackoffMs: 30_000, ...options.restart };
    this.uidBase = process.getuid?.() === 0 ? (options.uidBase === undefined ? 100_000 : options.uidBase) : null;
    for (const record of records) this.entries.set(record.serviceId, this.newEntry(record));
  }

  /** Finds the tools and reads the state; warns once when there is no sandbox, refuses under requireSandbox. */
  static async create(options: LocalRuntimeOptions): Promise<LocalRuntime> {
    const tools = await resolveSandboxTools(options);
    const state = options.state ?? LocalRuntime.fileState(options);
    return new LocalRuntime({ ...options, state }, tools, await state.load());
  }

  private static fileState(options: LocalRuntimeOptions): RuntimeState {
    // Env values (SVC_API_KEY among them) are never written in plaintext: no sealer, no file.
    if (!options.sealer) throw new Error('the local runtime needs a sealer (the vault) for its state file, or a state');
    const warn = options.warn ? { warn: options.warn } : {};
    return new FileRuntimeState(options.stateDir, { sealer: options.sealer, ...warn });
  }

  get sandbox(): SandboxKind {
    return sandboxKind(this.tools);
  }

  onChange(listener: (change: RouteChange) => void): Unsubscribe {
    this.emitter.on('route', listener);
    return () => this.emitter.off('route', listener);
  }

  onEvent(listener: (event: RuntimeEvent) => void): Unsubscribe {
    this.emitter.on('event', listener);
    return () => this.emitter.off('event', listener);
  }

  async deploy(request: DeployRequest): Promise<Instance> {
    const entry = this.entryFor(request.serviceId);
    entry.epoch++;
    this.cancelRestart(entry);
    if (!entry.active) entry.state = 'starting';
    const live = await this.launch(entry, request, 0);
    const failure = await this.healthy(live);
    if (failure) {
      await this.terminate(live, 0);
      if (!entry.active) entry.state = entry.record.desired === 'running' && entry.record.current ? 'crashed' : 'stopped';
      throw failure;
    }
    entry.crashes = [];
    await this.promote(entry, live);
    return this.instanceOf(live);
  }

  async start(serviceId: string): Promise<Instance> {
    const entry = this.entries.get(serviceId);
    if (!entry?.record.current) throw new RuntimeError('nothing_deployed', `service ${serviceId} has no deployment to start`);
    if (entry.active && entry.state === 'running') return this.instanceOf(entry.active);
    return this.deploy(entry.record.current);
  }

  async stop(serviceId: string): Promise<void> {
    const entry = this.entries.get(serviceId);
    if (!entry) throw new RuntimeError('unknown_service', `service ${serviceId} was never deployed here`);
    entry.epoch++;
    this.cancelRestart(entry);
    entry.record.desired = 'stopped';
    entry.state = 'stopped';
    await this.state.save(entry.record);
    if (entry.active) this.route(entry.record.serviceId, null);
    entry.active = null;
    await Promise.all([...entry.lives].map((live) => this.terminate(live, this.graceMs)));
  }

  async retire(deploymentId: string): Promise<void> {
    for (const entry of this.entries.values()) {
      const lives = [...entry.lives].filter((live) => live.request.deploymentId === deploymentId);
      if (entry.record.current?.deploymentId === deploymentId) {
        entry.epoch++;
        this.cancelRestart(entry);
        entry.record.current = null;
        entry.record.desired = 'stopped';
        entry.state = 'stopped';
        await this.state.save(entry.record);
      }
      if (entry.active && lives.includes(entry.active)) {
        entry.active = null;
        this.route(entry.record.serviceId, null);
      }
      await Promise.all(lives.map((live) => this.terminate(live, this.graceMs)));
    }
  }

  async status(serviceId: string): Promise<ServiceStatus> {
    const entry = this.entries.get(serviceId);
    if (!entry) return { serviceId, state: 'stopped', deploymentId: null, instances: [] };
    return {
      serviceId,
      state: entry.state,
      deploymentId: entry.record.current?.deploymentId ?? null,
      instances: [...entry.lives].map((live) => this.instanceOf(live)),
    };
  }

  /** Each instance's process tree as /proc shows it now; instances on their way out are left out. */
  async usage(): Promise<InstanceUsage[]> {
    const found: InstanceUsage[] = [];
    for (const entry of this.entries.values()) {
      for (const live of entry.lives) {
        if (live.stopping) continue;
        const tree = await treeUsage(live.pid, { procRoot: this.options.procRoot });
        if (!tree) continue;
        const { serviceId, deploymentId } = live.request;
        found.push({ serviceId, deploymentId, instance: `${live.pid}@${live.startedAt}`, startedAt: live.startedAt, ...tree });
      }
    }
    return found;
  }

  logs(serviceId: string, options: LogOptions = {}): AsyncIterable<LogLine> {
    return this.logStore.read(serviceId, options);
  }

  rotateLogs(serviceId: string): void {
    this.logStore.rotate(serviceId);
  }

  async run(serviceId: string, command: string, options: RunOptions): Promise<RunResult> {
    const current = options.build ? { serviceId, startCommand: command, ...options.build } : this.entries.get(serviceId)?.record.current;
    if (!current) throw new RuntimeError('nothing_deployed', `service ${serviceId} has no deployment to run a command beside`);
    const uid = this.uidBase === null ? null : this.uidBase + (this.ports.last - this.ports.first + 1);
    const child = await this.spawnSandboxed({ ...current, startCommand: command }, null, uid, `run-${Date.now()}`);
    const exited = once(child, 'exit') as Promise<[number | null, NodeJS.Signals | null]>;
    let output = '';
    const collect = (chunk: Buffer) => {
      if (output.length < RUN_OUTPUT_MAX_CHARS) output += chunk.toString('utf8').slice(0, RUN_OUTPUT_MAX_CHARS - output.length);
    };
    child.stdout!.on('data', collect);
    child.stderr!.on('data', collect);
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      void signalTree(child.pid!, 'SIGKILL');
    }, options.timeoutMs);
    const [code, signal] = await exited.finally(() => clearTimeout(timer));
    await signalTree(child.pid!, 'SIGKILL');
    return { exitCode: code, signal, timedOut, output };
  }

  /**
   * At the host's start: kills the process groups a previous host left (recorded, so not leaked
   * even without bwrap's die-with-parent), then starts every service that should run from its last
   * healthy artifact, never rebuilding. A service whose start fails stays recorded and is reported.
   */
  async restoreAll(): Promise<{ restored: string[]; failed: Array<{ serviceId: string; error: Error }> }> {
    const restored: string[] = [];
    const failed: Array<{ serviceId: string; error: Error }> = [];
    for (const entry of this.entries.values()) {
      for (const group of entry.record.groups) await killOrphanGroup(group.pgid, group.startTicks);
      entry.record.groups = [];
      await this.state.save(entry.record);
      if (entry.record.desired !== 'running' || !entry.record.current) continue;
      try {
        await this.deploy(entry.record.current);
        restored.push(entry.record.serviceId);
      } catch (error) {
        failed.push({ serviceId: entry.record.serviceId, error: error as Error });
      }
    }
    return { restored, failed };
  }

  /** Ends every process this host started, leaving what should run recorded for the next host. */
  async close(): Promise<void> {
    this.closed = true;
    const lives: Live[] = [];
    for (const entry of this.entries.values()) {
      this.cancelRestart(entry);
      lives.push(...entry.lives);
    }
    await Promise.all(lives.map((live) => this.terminate(live, 0)));
  }

  private get graceMs(): number {
    return this.options.stopGraceMs ?? 10_000;
  }

  private newEntry(record: ServiceRecord): Entry {
    const state: ServiceState = 'stopped';
    return { record, active: null, lives: new Set(), state, crashes: [], restartTimer: null, epoch: 0 };
  }

  private entryFor(serviceId: string): Entry {
    let entry = this.entries.get(serviceId);
    if (!entry) {
      entry = this.newEntry({ serviceId, desired: 'stopped', current: null, groups: [] });
      this.entries.set(serviceId, entry);
    }
    return entry;
  }

  private instanceOf(live: Live): Instance {
    const { serviceId, deploymentId } = live.request;
    const target = `127.0.0.1:${live.port}`;
    return { serviceId, deploymentId, pid: live.pid, port: live.port, target, startedAt: live.startedAt, restarts: live.restarts, sandbox: live.sandbox };
  }

  private route(serviceId: string, live: Live | null): void {
    const change: RouteChange = live ? { serviceId, deploymentId: live.request.deploymentId, target: `127.0.0.1:${live.port}` } : { serviceId, deploymentId: null, target: null };
    this.emitter.emit('route', change);
  }

  private event(event: RuntimeEvent): void {
    this.emitter.emit('event', event);
  }

  /** The new instance serves: route to it, record it as what should run, and drain the previous one. */
  private async promote(entry: Entry, live: Live): Promise<void> {
    const previous = entry.active;
    entry.active = live;
    entry.state = 'running';
    entry.record.current = live.request;
    entry.record.desired = 'running';
    await this.state.save(entry.record);
    this.route(entry.record.serviceId, live);
    this.runtimeLog(live, `healthy on PORT=${live.port}${previous ? `; replacing ${previous.request.deploymentId}` : ''}`);
    if (previous) await this.terminate(previous, this.graceMs);
  }

  private async healthy(live: Live): Promise<HealthFailure | null> {
    const probe = await healthGate({
      port: live.port,
      timeoutMs: this.options.healthTimeoutMs ?? 30_000,
      http: this.options.healthHttp ?? true,
      exited: live.exited,
    });
    if (probe === null) return null;
    const { serviceId, deploymentId } = live.request;
    // A process that died: wait for its exit status, so the failure says how it ended.
    const ended = await Promise.race([live.exited, sleep(0).then(() => null)]);
    this.runtimeLog(live, `health check failed: ${probe}`);
    this.event({ kind: 'health_failed', serviceId, deploymentId, probe });
    return new HealthFailure(serviceId, deploymentId, probe, ended?.code ?? null, ended?.signal ?? null, [...live.tail]);
  }

  private async launch(entry: Entry, request: DeployRequest, restarts: number): Promise<Live> {
    const port = await this.allocatePort();
    const uid = this.uidBase === null ? null : this.uidBase + (port - this.ports.first);
    const child = await this.spawnSandboxed(request, port, uid, `${request.deploymentId}-${port}`);
    const pid = child.pid!;
    const exited = new Promise<{ code: number | null; signal: string | null }>((resolve) => {
      child.once('exit', (code, signal) => resolve({ code, signal }));
    });
    const live: Live = { request, port, child, pid, startedAt: new Date().toISOString(), restarts, sandbox: this.sandbox, exited, stopping: false, tail: [], done: Promise.resolve() };
    entry.lives.add(live);
    this.pipeLogs(live, 'stdout');
    this.pipeLogs(live, 'stderr');
    this.runtimeLog(live, `started pid ${pid} on PORT=${port} (sandbox: ${live.sandbox})`);
    const memoryBytes = request.limits?.memoryBytes ?? this.limits.memoryBytes;
    this.event({ kind: 'started', serviceId: request.serviceId, deploymentId: request.deploymentId, instance: instanceName(live), memoryBytes });
    entry.record.groups.push({ deploymentId: request.deploymentId, pgid: pid, startTicks: await startTicksOf(pid) });
    await this.state.save(entry.record);
    live.done = exited.then((status) => this.onExit(entry, live, status));
    return live;
  }

  private async spawnSandboxed(request: DeployRequest, port: number | null, uid: number | null, homeName: string): Promise<ChildProcess> {
    const unsandboxedHome = path.join(this.options.stateDir, 'homes', homeName);
    if (!this.tools.bwrap) await mkdir(unsandboxedHome, { recursive: true, mode: 0o700 });
    const limits = { ...this.limits, ...request.limits };
    // Without a sandbox nothing binds the folder in: an app of another uid could not reach it inside
    // the private data directory, so it runs as the host (the warning at start says so).
    const appUid = this.tools.bwrap ? uid : null;
    // The app's own uid reads its folder: it is handed to that uid at every start (an instance's uid
    // follows its port), keeping the owner-only modes the service gives its data directory's contents
    // (core/kernel/private-files.ts). The sandbox binds it read-only.
    if (appUid !== null) await execFileAsync('chown', ['-R', `${appUid}:${appUid}`, request.artifactDir]);
    const command = sandboxCommand({ tools: this.tools, artifactDir: request.artifactDir, command: request.startCommand, limits, unsandboxedHome, uid: appUid });
    const env: Record<string, string> = { PATH: '/usr/local/bin:/usr/bin:/bin', ...request.env, HOME: command.home, TMPDIR: '/tmp' };
    if (!this.tools.bwrap) env['TMPDIR'] = command.home;
    if (port === null) delete env['PORT'];
    else env['PORT'] = String(port);
    const child = spawn(command.file, command.args, {
      cwd: command.cwd,
      env,
      // Its own process group: the runtime signals the app and everything it started as one.
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe'],
      // Started as the host; the command line drops to the app's uid (sandbox.ts).
    });
    await once(child, 'spawn');
    return child;
  }

  private pipeLogs(live: Live, stream: 'stdout' | 'stderr'): void {
    let partial = '';
    const source = live.child[stream]!;
    source.on('data', (chunk: Buffer) => {
      const parts = (partial + chunk.toString('utf8')).split('\n');
      partial = parts.pop()!;
      this.writeLines(live, stream, parts);
    });
    source.on('end', () => {
      if (partial !== '') this.writeLines(live, stream, [partial]);
    });
  }

  private runtimeLog(live: Live, line: string): void {
    this.writeLines(live, 'runtime', [line]);
  }

  private writeLines(live: Live, stream: LogStream, lines: string[]): void {
    const at = new Date().toISOString();
    const { deploymentId } = live.request;
    if (stream !== 'runtime') live.tail.push(...lines.map((line) => `${stream}: ${line}`));
    live.tail.splice(0, Math.max(0, live.tail.length - TAIL_LINES));
    this.logStore.append(
      live.request.serviceId,
      lines.map((line) => ({ at, deploymentId, stream, line })),
    );
  }

  private async onExit(entry: Entry, live: Live, status: { code: number | null; signal: string | null }): Promise<void> {
    // What the app started may outlive it (none sandbox): nothing of a finished instance stays.
    await signalTree(live.pid, 'SIGKILL');
    entry.lives.delete(live);
    entry.record.groups = entry.record.groups.filter((group) => group.pgid !== live.pid);
    await this.state.save(entry.record);
    const { serviceId, deploymentId } = live.request;
    this.runtimeLog(live, `exited (${status.signal ? `signal ${status.signal}` : `code ${status.code}`})`);
    this.event({ kind: 'exited', serviceId, deploymentId, instance: instanceName(live), ...status });
    if (live.stopping || entry.active !== live || this.closed) return;
    entry.active = null;
    this.route(serviceId, null);
    this.crashed(entry, deploymentId);
  }

  /** A crash of what should run: restart after a backoff, or give up after maxCrashes within windowMs. */
  private crashed(entry: Entry, deploymentId: string): void {
    const { maxCrashes, windowMs, backoffMs, maxBackoffMs } = this.restartPolicy;
    const now = Date.now();
    entry.crashes = [...entry.crashes.filter((at) => now - at < windowMs), now];
    const serviceId = entry.record.serviceId;
    if (entry.crashes.length >= maxCrashes) {
      entry.state = 'crashed';
      this.event({ kind: 'crashed', serviceId, deploymentId, crashes: entry.crashes.length, windowMs });
      return;
    }
    entry.state = 'starting';
    const attempt = entry.crashes.length;
    const inMs = Math.min(backoffMs * 2 ** (attempt - 1), maxBackoffMs);
    this.event({ kind: 'restarting', serviceId, deploymentId, attempt, inMs });
    const epoch = entry.epoch;
    entry.restartTimer = setTimeout(() => {
      entry.restartTimer = null;
      void this.restart(entry, epoch, attempt);
    }, inMs);
  }

  private async restart(entry: Entry, epoch: number, attempt: number): Promise<void> {
    const request = entry.record.current;
    if (!request || epoch !== entry.epoch || this.closed) return;
    let live: Live;
    try {
      live = await this.launch(entry, request, attempt);
    } catch (error) {
      this.options.warn?.(`restart of ${request.deploymentId} failed to spawn: ${(error as Error).message}`);
      this.crashed(entry, request.deploymentId);
      return;
    }
    const failure = await this.healthy(live);
    if (failure || epoch !== entry.epoch || this.closed) {
      await this.terminate(live, 0);
      if (failure && epoch === entry.epoch) this.crashed(entry, request.deploymentId);
      return;
    }
    await this.promote(entry, live);
  }

  private cancelRestart(entry: Entry): void {
    if (entry.restartTimer) clearTimeout(entry.restartTimer);
    entry.restartTimer = null;
  }

  /** SIGTERM to the instance's whole tree, SIGKILL after the grace period; resolves once it has exited. */
  private async terminate(live: Live, graceMs: number): Promise<void> {
    live.stopping = true;
    if (graceMs > 0) {
      this.runtimeLog(live, 'SIGTERM');
      await signalTree(live.pid, 'SIGTERM');
      const grace = sleep(graceMs, 'grace' as const);
      if ((await Promise.race([live.exited, grace])) !== 'grace') return live.done;
      this.runtimeLog(live, `still running ${graceMs} ms after SIGTERM: SIGKILL`);
    }
    await signalTree(live.pid, 'SIGKILL');
    await live.done;
  }

  private async allocatePort(): Promise<number> {
    const { first, last } = this.ports;
    const taken = new Set<number>();
    for (const entry of this.entries.values()) for (const live of entry.lives) taken.add(live.port);
    const size = last - first + 1;
    for (let tried = 0; tried < size; tried++) {
      const port = this.nextPort;
      this.nextPort = port >= last ? first : port + 1;
      if (!taken.has(port) && (await portIsFree(port))) return port;
    }
    throw new RuntimeError('no_free_port', `no free port between ${first} and ${last} on 127.0.0.1`);
  }
}
