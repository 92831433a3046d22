import { EventEmitter } from 'node:events';
import { setTimeout as sleep } from 'node:timers/promises';
import { ApiException, AppsV1Api, BatchV1Api, CoreV1Api, CustomObjectsApi, KubeConfig, type V1ContainerStatus, type V1Deployment, type V1Pod, type V1Secret } from '@kubernetes/client-node';
import {
  APP_CONTAINER,
  artifactSecret,
  artifactSecretName,
  deploymentObject,
  envSecret,
  envSecretName,
  jobObject,
  LABEL_DEPLOYMENT,
  LABEL_ONE_OFF,
  type ObjectSettings,
  objectName,
  selectorOf,
  serviceObject,
  targetOf,
} from './kubernetes-objects.ts';
import {
  type DeployRequest,
  HealthFailure,
  type Instance,
  type LogLine,
  type LogOptions,
  type RouteChange,
  type RunOptions,
  type RunResult,
  RuntimeError,
  type RuntimeEvent,
  type RuntimeLimits,
  type RuntimePort,
  type ServiceState,
  type InstanceUsage,
  type ServiceStatus,
  type Unsubscribe,
} from './runtime-port.ts';
import type { SandboxTools } from './sandbox.ts';
import { PodUsageReader } from './kubernetes-usage.ts';

/** The `kubernetes` runtime (README.md beside this file): a Deployment, a Service and Secrets per service. */
export interface KubernetesRuntimeOptions {
  /** The cluster and credentials: a loaded kubeconfig (its current context). */
  kubeConfig: KubeConfig;
  namespace: string;
  /** The image the app runs in (its interpreters): `node:20-bookworm-slim`, …. */
  baseImage: string;
  /** The init container's image, with `sh`, `wget` and `tar` (default `busybox:1.36`). */
  fetchImage?: string;
  /** PORT inside the pod and the Service's port (default 8080). */
  containerPort?: number;
  /** The cluster's DNS domain, for the proxy's target (default `cluster.local`). */
  clusterDomain?: string;
  /** A URL the cluster can fetch the deployment's artifact (a gzipped tar) from; signed and expiring. */
  artifactUrl: (deploymentId: string) => Promise<string>;
  /** How long a rollout may take to become available before the deploy fails (default 120 s). */
  rolloutTimeoutMs?: number;
  /** Between reads of a rollout's or a one-off's status, and of followed logs (default 1 s). */
  pollMs?: number;
  limits?: RuntimeLimits;
  /** Told what the operator should know once (a cluster without the metrics API). */
  warn?: (message: string) => void;
  /** This machine's sandbox, for the builds (the apps themselves run in pods); default none. */
  tools?: SandboxTools;
  now?: () => Date;
}

const TAIL_LINES = 20;
const RUN_OUTPUT_MAX_CHARS = 1024 * 1024;

function isStatus(error: unknown, code: number): boolean {
  return error instanceof ApiException && error.code === code;
}

/** Null for a 404: the object does not exist. */
async function orNull<T>(read: Promise<T>): Promise<T | null> {
  try {
    return await read;
  } catch (error) {
    if (isStatus(error, 404)) return null;
    throw error;
  }
}

/** A rollout is available once the controller saw the spec and every replica is updated, available, and alone. */
export function rolloutAvailable(deployment: V1Deployment): boolean {
  const wanted = deployment.spec?.replicas ?? 1;
  const status = deployment.status ?? {};
  const observed = (status.observedGeneration ?? 0) >= (deployment.metadata?.generation ?? 1);
  return observed && (status.updatedReplicas ?? 0) >= wanted && (status.availableReplicas ?? 0) >= wanted && (status.replicas ?? 0) <= wanted;
}

/** Why a pod is not serving, worded from its containers' states (`CrashLoopBackOff`, `ImagePullBackOff`, …). */
export function podReasons(pod: V1Pod): string[] {
  const name = pod.metadata?.name ?? '?';
  const reasons: string[] = [];
  const describe = (kind: string, status: V1ContainerStatus) => {
    const waiting = status.state?.waiting;
    const terminated = status.state?.terminated ?? status.lastState?.terminated;
    const restarts = status.restartCount ? `, ${status.restartCount} restarts` : '';
    const exit = terminated ? `, last exit code ${terminated.exitCode}${terminated.reason ? ` (${terminated.reason})` : ''}` : '';
    if (waiting?.reason && waiting.reason !== 'PodInitializing' && waiting.reason !== 'ContainerCreating') {
      reasons.push(`pod ${name}: ${kind} ${status.name}: ${waiting.reason}${waiting.message ? ` (${waiting.message})` : ''}${restarts}${exit}`);
    } else if (status.state?.terminated && status.state.terminated.exitCode !== 0) {
      reasons.push(`pod ${name}: ${kind} ${status.name}: exited with code ${status.state.terminated.exitCode}${restarts}`);
    } else if (!status.ready && status.state?.running && kind === 'container') {
      reasons.push(`pod ${name}: container ${status.name}: running but not ready (nothing listening on its port)${restarts}`);
    }
  };
  for (const status of pod.status?.initContainerStatuses ?? []) describe('init container', status);
  for (const status of pod.status?.containerStatuses ?? []) describe('container', status);
  if (reasons.length === 0) {
    const unscheduled = pod.status?.conditions?.find((condition) => condition.type === 'PodScheduled' && condition.status === 'False');
    if (unscheduled) reasons.push(`pod ${name}: not scheduled: ${unscheduled.reason ?? ''} ${unscheduled.message ?? ''}`.trim());
    else reasons.push(`pod ${name}: ${pod.status?.phase ?? 'Pending'}`);
  }
  return reasons;
}

function exitCodeOf(pod: V1Pod | undefined): number | null {
  const status = pod?.status?.containerStatuses?.find((one) => one.name === APP_CONTAINER);
  return status?.state?.terminated?.exitCode ?? status?.lastState?.terminated?.exitCode ?? null;
}

function restartsOf(pod: V1Pod): number {
  return (pod.status?.containerStatuses ?? []).reduce((sum, status) => sum + (status.restartCount ?? 0), 0);
}

function seconds(ms: number): string {
  return `${Math.round(ms / 100) / 10}s`;
}

export class KubernetesRuntime implements RuntimePort {
  readonly tools: SandboxTools;
  private readonly apps: AppsV1Api;
  private readonly core: CoreV1Api;
  private readonly batch: BatchV1Api;
  private readonly settings: ObjectSettings;
  private readonly emitter = new EventEmitter().setMaxListeners(0);
  private readonly queues = new Map<string, Promise<unknown>>();
  private readonly now: () => Date;
  private oneOffs = 0;
  private readonly podUsage: PodUsageReader;

  constructor(private readonly options: KubernetesRuntimeOptions) {
    this.apps = options.kubeConfig.makeApiClient(AppsV1Api);
    this.core = options.kubeConfig.makeApiClient(CoreV1Api);
    this.batch = options.kubeConfig.makeApiClient(BatchV1Api);
    this.podUsage = new PodUsageReader({
      core: this.core,
      metrics: options.kubeConfig.makeApiClient(CustomObjectsApi),
      namespace: options.namespace,
      ...(options.warn ? { warn: options.warn } : {}),
    });
    this.now = options.now ?? (() => new Date());
    this.tools = options.tools ?? { bwrap: null, prlimit: '/usr/bin/prlimit' };
    this.settings = {
      namespace: options.namespace,
      baseImage: options.baseImage,
      fetchImage: options.fetchImage ?? 'busybox:1.36',
      containerPort: options.containerPort ?? 8080,
      clusterDomain: options.clusterDomain ?? 'cluster.local',
    };
  }

  /** A runtime on the cluster a kubeconfig file names (its current context). */
  static fromFile(path: string, options: Omit<KubernetesRuntimeOptions, 'kubeConfig'>): KubernetesRuntime {
    const kubeConfig = new KubeConfig();
    kubeConfig.loadFromFile(path);
    return new KubernetesRuntime({ ...options, kubeConfig });
  }

  onChange(listener: (change: RouteChange) => void): Unsubscribe {
    this.emitter.on('route', listener);
    return () => this.emitter.off('route', listener);
  }

  onEvent(listener: (event: RuntimeEvent) => void): Unsubscribe {
    this.emitter.on('event', listener);
    return () => this.emitter.off('event', listener);
  }

  /**
   * Writes the Secrets, the Service and the Deployment (a template annotation bumped, so the pods
   * roll), then waits for the rollout. A rollout not available in time is undone (the previous
   * template, env and artifact back; nothing left of a first deploy) and rejects with the pods' reasons.
   */
  deploy(request: DeployRequest): Promise<Instance> {
    return this.exclusive(request.serviceId, async () => {
      const { serviceId, deploymentId } = request;
      const name = objectName(serviceId);
      const namespace = this.settings.namespace;
      const previous = await orNull(this.apps.readNamespacedDeployment({ name, namespace }));
      const previousEnv = await orNull(this.core.readNamespacedSecret({ name: envSecretName(serviceId), namespace }));
      const previousArtifact = await orNull(this.core.readNamespacedSecret({ name: artifactSecretName(serviceId), namespace }));
      await this.putSecret(envSecret(serviceId, this.settings, request.env));
      await this.putSecret(artifactSecret(serviceId, this.settings, await this.options.artifactUrl(deploymentId)));
      await this.putService(serviceId);
      const body = deploymentObject(this.settings, {
        serviceId,
        deploymentId,
        startCommand: request.startCommand,
        limits: { ...this.options.limits, ...request.limits },
        port: this.settings.containerPort,
        env: request.env,
        restartedAt: this.now().toISOString(),
        replicas: 1,
      });
      if (previous) {
        body.metadata!.resourceVersion = previous.metadata?.resourceVersion;
        await this.apps.replaceNamespacedDeployment({ name, namespace, body });
      } else {
        await this.apps.createNamespacedDeployment({ namespace, body });
      }
      const failure = await this.awaitRollout(serviceId, deploymentId);
      if (failure) {
        await this.undo(serviceId, previous, previousEnv, previousArtifact);
        throw failure;
      }
      return this.routed(serviceId, deploymentId);
    });
  }

  /** Scales the Deployment to 0: it stays stopped until `start`, whatever restarts around it. */
  stop(serviceId: string): Promise<void> {
    return this.exclusive(serviceId, async () => {
      const deployment = await this.deployment(serviceId);
      if (!deployment) throw new RuntimeError('unknown_service', `service ${serviceId} was never deployed here`);
      this.route({ serviceId, deploymentId: null, target: null });
      await this.scale(deployment, 0);
    });
  }

  /** Scales to 1 with a fresh artifact URL and a bumped annotation; resolves once available, as `deploy`. */
  start(serviceId: string): Promise<Instance> {
    return this.exclusive(serviceId, async () => {
      const deployment = await this.deployment(serviceId);
      const deploymentId = deployment?.spec?.template.metadata?.labels?.[LABEL_DEPLOYMENT];
      if (!deployment || !deploymentId) throw new RuntimeError('nothing_deployed', `service ${serviceId} has nothing deployed to start`);
      await this.putSecret(artifactSecret(serviceId, this.settings, await this.options.artifactUrl(deploymentId)));
      await this.scale(deployment, 1, this.now().toISOString());
      const failure = await this.awaitRollout(serviceId, deploymentId);
      if (failure) throw failure;
      return this.routed(serviceId, deploymentId);
    });
  }

  /** Retiring the deployment a service runs deletes its Deployment, Service and Secrets; an older one has nothing left. */
  async retire(deploymentId: string): Promise<void> {
    const namespace = this.settings.namespace;
    const labelSelector = `${LABEL_DEPLOYMENT}=${deploymentId}`;
    const found = await this.apps.listNamespacedDeployment({ namespace, labelSelector });
    for (const deployment of found.items) {
      const serviceId = deployment.spec?.template.metadata?.labels?.['apps.svc.dev/service'];
      if (!serviceId) continue;
      await this.exclusive(serviceId, async () => {
        this.route({ serviceId, deploymentId: null, target: null });
        const name = objectName(serviceId);
        const propagationPolicy = 'Foreground';
        await orNull(this.apps.deleteNamespacedDeployment({ name, namespace, propagationPolicy }));
        await orNull(this.core.deleteNamespacedService({ name, namespace }));
        await orNull(this.core.deleteNamespacedSecret({ name: envSecretName(serviceId), namespace }));
        await orNull(this.core.deleteNamespacedSecret({ name: artifactSecretName(serviceId), namespace }));
      });
    }
  }

  /** The kubelet rotates containers' logs itself: a refresh here reads them afresh, nothing to rotate. */
  rotateLogs(_serviceId: string): void {}

  /** Pods' memory and CPU from the cluster's metrics API (kubernetes-usage.ts). */
  usage(): Promise<InstanceUsage[]> {
    return this.podUsage.read();
  }

  async status(serviceId: string): Promise<ServiceStatus> {
    const deployment = await this.deployment(serviceId);
    if (!deployment) return { serviceId, state: 'stopped', deploymentId: null, instances: [] };
    const deploymentId = deployment.spec?.template.metadata?.labels?.[LABEL_DEPLOYMENT] ?? null;
    const pods = await this.pods(serviceId);
    const instances: Instance[] = pods.map((pod) => ({
      serviceId,
      deploymentId: pod.metadata?.labels?.[LABEL_DEPLOYMENT] ?? '',
      pid: null,
      port: this.settings.containerPort,
      target: targetOf(serviceId, this.settings),
      startedAt: (pod.status?.startTime ?? pod.metadata?.creationTimestamp ?? this.now()).toString(),
      restarts: restartsOf(pod),
      sandbox: 'container',
    }));
    let state: ServiceState;
    if ((deployment.spec?.replicas ?? 1) === 0) state = 'stopped';
    else if (rolloutAvailable(deployment)) state = 'running';
    else if (pods.some((pod) => podReasons(pod).some((reason) => reason.includes('CrashLoopBackOff')))) state = 'crashed';
    else state = 'starting';
    return { serviceId, state, deploymentId, instances };
  }

  /** Every pod's log of the service (`timestamps`, so `since` holds to the line), followed by polling. */
  async *logs(serviceId: string, options: LogOptions = {}): AsyncIterable<LogLine> {
    const seen = new Map<string, string>();
    let since = options.since ?? null;
    for (;;) {
      const lines: LogLine[] = [];
      for (const pod of await this.pods(serviceId)) {
        const name = pod.metadata!.name!;
        const after = seen.get(name) ?? null;
        const text = await this.podLog(name, since);
        for (const raw of text.split('\n')) {
          const space = raw.indexOf(' ');
          if (space < 0) continue;
          const stamp = raw.slice(0, space);
          const at = new Date(stamp);
          if (Number.isNaN(at.getTime()) || (since && at < since) || (after && stamp <= after)) continue;
          seen.set(name, stamp);
          const deploymentId = pod.metadata?.labels?.[LABEL_DEPLOYMENT] ?? '';
          lines.push({ at: at.toISOString(), deploymentId, stream: 'stdout', line: raw.slice(space + 1) });
        }
      }
      lines.sort((a, b) => a.at.localeCompare(b.at));
      yield* lines;
      if (!options.follow) return;
      if (lines.length > 0) since = new Date(lines[lines.length - 1]!.at);
      await sleep(this.pollMs);
    }
  }

  /** A Job from the running deployment's pod template: its artifact, env and image, no PORT; its exit code and log. */
  async run(serviceId: string, command: string, options: RunOptions): Promise<RunResult> {
    const deployment = await this.deployment(serviceId);
    const deploymentId = deployment?.spec?.template.metadata?.labels?.[LABEL_DEPLOYMENT];
    if (!deployment || !deploymentId) throw new RuntimeError('nothing_deployed', `service ${serviceId} has no deployment to run a command beside`);
    await this.putSecret(artifactSecret(serviceId, this.settings, await this.options.artifactUrl(deploymentId)));
    const namespace = this.settings.namespace;
    const name = `${objectName(serviceId).slice(0, 40)}-run-${Date.now().toString(36)}${(this.oneOffs++).toString(36)}`;
    const limits = { ...this.options.limits };
    const body = jobObject(this.settings, name, { serviceId, deploymentId, startCommand: command, limits, port: null }, options.timeoutMs);
    await this.batch.createNamespacedJob({ namespace, body });
    try {
      const deadline = Date.now() + options.timeoutMs;
      let timedOut = false;
      for (;;) {
        const job = await this.batch.readNamespacedJob({ name, namespace });
        const conditions = job.status?.conditions ?? [];
        const failed = conditions.find((condition) => condition.type === 'Failed' && condition.status === 'True');
        if (failed?.reason === 'DeadlineExceeded') timedOut = true;
        if ((job.status?.succeeded ?? 0) > 0 || (job.status?.failed ?? 0) > 0 || failed) break;
        if (Date.now() >= deadline) {
          timedOut = true;
          break;
        }
        await sleep(this.pollMs);
      }
      const pods = await this.core.listNamespacedPod({ namespace, labelSelector: `${LABEL_ONE_OFF}=${name}` });
      const pod = pods.items[0];
      // A pod that never started its container has no log: its output is empty.
      const output = pod ? await this.podLog(pod.metadata!.name!, null, false).catch(() => '') : '';
      const exitCode = timedOut ? null : exitCodeOf(pod);
      return { exitCode, signal: timedOut ? 'SIGKILL' : null, timedOut, output: output.slice(0, RUN_OUTPUT_MAX_CHARS) };
    } finally {
      await orNull(this.batch.deleteNamespacedJob({ name, namespace, propagationPolicy: 'Background' }));
    }
  }

  /** Nothing to end: the cluster keeps the apps running without this process. */
  async close(): Promise<void> {
    await Promise.allSettled([...this.queues.values()]);
  }

  /** The cluster restores its own Deployments; each running one is routed again. */
  async restoreAll(): Promise<{ restored: string[]; failed: Array<{ serviceId: string; error: Error }> }> {
    const namespace = this.settings.namespace;
    const labelSelector = `app.kubernetes.io/managed-by=${selectorOf('x')['app.kubernetes.io/managed-by']}`;
    const found = await this.apps.listNamespacedDeployment({ namespace, labelSelector });
    const restored: string[] = [];
    for (const deployment of found.items) {
      const labels = deployment.spec?.template.metadata?.labels ?? {};
      const serviceId = labels['apps.svc.dev/service'];
      const deploymentId = labels[LABEL_DEPLOYMENT];
      if (!serviceId || !deploymentId || (deployment.spec?.replicas ?? 1) === 0) continue;
      this.route({ serviceId, deploymentId, target: targetOf(serviceId, this.settings) });
      restored.push(serviceId);
    }
    return { restored, failed: [] };
  }

  private get pollMs(): number {
    return this.options.pollMs ?? 1_000;
  }

  /** Calls on one service run one after another (a stop during a deploy waits for it). */
  private exclusive<T>(serviceId: string, work: () => Promise<T>): Promise<T> {
    const before = this.queues.get(serviceId) ?? Promise.resolve();
    const result = before.then(work, work);
    const tail = result.catch(() => undefined);
    this.queues.set(serviceId, tail);
    void tail.then(() => {
      if (this.queues.get(serviceId) === tail) this.queues.delete(serviceId);
    });
    return result;
  }

  private route(change: RouteChange): void {
    this.emitter.emit('route', change);
  }

  private routed(serviceId: string, deploymentId: string): Instance {
    const target = targetOf(serviceId, this.settings);
    this.route({ serviceId, deploymentId, target });
    const startedAt = this.now().toISOString();
    return { serviceId, deploymentId, pid: null, port: this.settings.containerPort, target, startedAt, restarts: 0, sandbox: 'container' };
  }

  private deployment(serviceId: string): Promise<V1Deployment | null> {
    return orNull(this.apps.readNamespacedDeployment({ name: objectName(serviceId), namespace: this.settings.namespace }));
  }

  private async pods(serviceId: string, deploymentId?: string): Promise<V1Pod[]> {
    const selector = Object.entries(selectorOf(serviceId)).map(([key, value]) => `${key}=${value}`);
    if (deploymentId) selector.push(`${LABEL_DEPLOYMENT}=${deploymentId}`);
    const list = await this.core.listNamespacedPod({ namespace: this.settings.namespace, labelSelector: selector.join(',') });
    return list.items;
  }

  private async podLog(name: string, since: Date | null, timestamps = true, previous = false): Promise<string> {
    const sinceSeconds = since ? Math.max(1, Math.ceil((this.now().getTime() - since.getTime()) / 1000) + 1) : undefined;
    const request = { name, namespace: this.settings.namespace, container: APP_CONTAINER, timestamps, previous };
    const text = await orNull(this.core.readNamespacedPodLog(sinceSeconds ? { ...request, sinceSeconds } : request));
    return typeof text === 'string' ? text : '';
  }

  private async putSecret(body: V1Secret): Promise<void> {
    const name = body.metadata!.name!;
    const namespace = this.settings.namespace;
    const existing = await orNull(this.core.readNamespacedSecret({ name, namespace }));
    if (existing) {
      body.metadata!.resourceVersion = existing.metadata?.resourceVersion;
      await this.core.replaceNamespacedSecret({ name, namespace, body });
    } else {
      await this.core.createNamespacedSecret({ namespace, body });
    }
  }

  private async putService(serviceId: string): Promise<void> {
    const namespace = this.settings.namespace;
    const body = serviceObject(serviceId, this.settings);
    // A Service's spec keeps its cluster IP: an existing one is left as it is (its ports never change).
    if (await orNull(this.core.readNamespacedService({ name: body.metadata!.name!, namespace }))) return;
    await this.core.createNamespacedService({ namespace, body });
  }

  private async scale(deployment: V1Deployment, replicas: number, restartedAt?: string): Promise<void> {
    const name = deployment.metadata!.name!;
    const namespace = this.settings.namespace;
    const body: V1Deployment = structuredClone(deployment);
    delete body.status;
    body.spec!.replicas = replicas;
    if (restartedAt) body.spec!.template.metadata!.annotations = { ...body.spec!.template.metadata!.annotations, 'apps.svc.dev/restarted-at': restartedAt };
    await this.apps.replaceNamespacedDeployment({ name, namespace, body });
  }

  /** Polls the Deployment until its rollout is available; a failure with the pods' reasons after the timeout. */
  private async awaitRollout(serviceId: string, deploymentId: string): Promise<HealthFailure | null> {
    const timeoutMs = this.options.rolloutTimeoutMs ?? 120_000;
    const started = Date.now();
    for (;;) {
      const deployment = await this.deployment(serviceId);
      if (deployment && rolloutAvailable(deployment)) return null;
      if (Date.now() - started >= timeoutMs) break;
      await sleep(this.pollMs);
    }
    const pods = await this.pods(serviceId, deploymentId);
    const reasons = pods.flatMap(podReasons);
    const probe = `rollout not available after ${seconds(timeoutMs)}: ${reasons.length > 0 ? reasons.join('; ') : 'no pod was created'}`;
    const failing = pods.find((pod) => restartsOf(pod) > 0 || exitCodeOf(pod) !== null) ?? pods[0];
    let lastLines: string[] = [];
    if (failing) {
      const text = await this.podLog(failing.metadata!.name!, null, false, restartsOf(failing) > 0).catch(() => '');
      lastLines = text
        .split('\n')
        .filter((line) => line !== '')
        .slice(-TAIL_LINES);
    }
    this.emitter.emit('event', { kind: 'health_failed', serviceId, deploymentId, probe } satisfies RuntimeEvent);
    return new HealthFailure(serviceId, deploymentId, probe, exitCodeOf(failing), null, lastLines);
  }

  /** After a failed rollout: the previous template, env and artifact back, or nothing of a first deploy. */
  private async undo(serviceId: string, previous: V1Deployment | null, env: V1Secret | null, artifact: V1Secret | null): Promise<void> {
    const namespace = this.settings.namespace;
    const name = objectName(serviceId);
    if (!previous) {
      await orNull(this.apps.deleteNamespacedDeployment({ name, namespace, propagationPolicy: 'Foreground' }));
      await orNull(this.core.deleteNamespacedService({ name, namespace }));
      await orNull(this.core.deleteNamespacedSecret({ name: envSecretName(serviceId), namespace }));
      await orNull(this.core.deleteNamespacedSecret({ name: artifactSecretName(serviceId), namespace }));
      return;
    }
    for (const saved of [env, artifact]) {
      if (!saved) continue;
      await this.putSecret({
        apiVersion: 'v1',
        kind: 'Secret',
        metadata: { name: saved.metadata!.name!, labels: saved.metadata?.labels ?? {} },
        type: saved.type ?? 'Opaque',
        data: saved.data ?? {},
      });
    }
    const current = await this.deployment(serviceId);
    const body: V1Deployment = structuredClone(current ?? previous);
    delete body.status;
    body.metadata!.labels = previous.metadata?.labels ?? {};
    body.spec = previous.spec!;
    await this.apps.replaceNamespacedDeployment({ name, namespace, body });
  }
}
