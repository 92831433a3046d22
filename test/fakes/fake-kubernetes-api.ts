import { createHash, randomUUID } from 'node:crypto';
import { EventEmitter, once } from 'node:events';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * A Kubernetes API server on 127.0.0.1, over real HTTP, speaking the wire shapes a client
 * (`@kubernetes/client-node`) reads: apps/v1 Deployments, v1 Services, Secrets, Pods and a pod's
 * log, batch/v1 Jobs, and `Status` objects for errors (404 NotFound, 409 Conflict on a stale
 * resourceVersion or an existing name, 401 without the bearer token). Only equality label selectors.
 *
 * It has no kubelet: a controller loop (`tick`, every `tickMs` unless `hold()`) moves each pod one
 * step at a time through what a cluster shows (init container → running, not ready → ready, or into
 * CrashLoopBackOff / ImagePullBackOff / an init container's failure), as `podOutcome` decides from
 * the pod's spec; a Deployment's new pods replace the old ones only once ready (maxUnavailable 0),
 * and its status (`observedGeneration`, `updatedReplicas`, `availableReplicas`) follows. Jobs' pods
 * end as `jobOutcome` decides.
 */

type Json = Record<string, any>;

export type PodOutcome = { kind: 'ready'; log?: string[] } | { kind: 'crash'; exitCode: number; log?: string[] } | { kind: 'image-pull' } | { kind: 'init-fails'; exitCode: number };

export type JobOutcome = { kind: 'exit'; exitCode: number; output: string } | { kind: 'hang' };

interface Pod {
  object: Json;
  /** The owner: `deployment/<name>` or `job/<name>`. */
  owner: string;
  templateHash: string;
  step: number;
  /** The init container's fetch of ARTIFACT_URL (with `fetchArtifacts`): null until it settled. */
  fetched: { ok: boolean } | null;
  /** Lines of each run of the app container, newest last: `previous` reads the one before. */
  runs: Array<Array<{ at: string; line: string }>>;
}

export interface RecordedRequest {
  method: string;
  path: string;
  body: string;
}

export interface ArtifactFetch {
  url: string;
  status: number;
  bytes: number;
  /** Starts as a gzip stream does (1f 8b). */
  gzip: boolean;
}

export interface FakeKubernetesApi {
  url: string;
  /** What the init containers fetched (with `fetchArtifacts`). */
  fetches: ArtifactFetch[];
  token: string;
  /** A kubeconfig (YAML) whose current context is this server with its token. */
  kubeconfig(namespace?: string): string;
  requests: RecordedRequest[];
  /** Decides how a pod of a Deployment goes, from its spec (default: ready). */
  podOutcome: (pod: Json) => PodOutcome;
  /** Decides how a Job's pod ends, from its spec (default: exit 0 with no output). */
  jobOutcome: (pod: Json) => JobOutcome;
  /** The stored object (`deployments`, `services`, `secrets`, `pods`, `jobs`), as a GET would answer. */
  get(kind: string, name: string, namespace?: string): Json | null;
  list(kind: string, namespace?: string): Json[];
  /** Stops the controller loop: nothing moves until `release()` or `tick()`. */
  hold(): void;
  release(): void;
  /** One controller step for everything. */
  tick(): void;
  /** Resolves at the next request matching the method and path (a regular expression on the path). */
  nextRequest(method: string, path: RegExp): Promise<RecordedRequest>;
  /**
   * The metrics API (`metrics.k8s.io/v1beta1` PodMetrics), as metrics-server serves it: a running
   * pod's entry is what is set here by pod name (none set: no entry, as before its first scrape);
   * null answers 404, a cluster without metrics-server.
   */
  podMetrics: Map<string, PodUsage> | null;
  close(): Promise<void>;
}

/** One pod's metrics reading: its containers' usage (quantities: `250m`, `64Mi`) over `window` ending at `timestamp`. */
export interface PodUsage {
  cpu: string;
  memory: string;
  timestamp: string;
  window: string;
}

const KINDS: Record<string, { group: string; kind: string; apiVersion: string }> = {
  deployments: { group: '/apis/apps/v1', kind: 'Deployment', apiVersion: 'apps/v1' },
  services: { group: '/api/v1', kind: 'Service', apiVersion: 'v1' },
  secrets: { group: '/api/v1', kind: 'Secret', apiVersion: 'v1' },
  pods: { group: '/api/v1', kind: 'Pod', apiVersion: 'v1' },
  jobs: { group: '/apis/batch/v1', kind: 'Job', apiVersion: 'batch/v1' },
};

class HttpStatus extends Error {
  constructor(
    readonly code: number,
    readonly reason: string,
    message: string,
    readonly details: Json = {},
  ) {
    super(message);
  }
}

function statusBody(code: number, reason: string, message: string, details: Json): Json {
  return { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message, reason, details, code };
}

function matches(labels: Json | undefined, selector: string | null): boolean {
  if (!selector) return true;
  return selector.split(',').every((term) => {
    // Equality (`k=v`, `k==v`), existence (`k`) and absence (`!k`), as the API server reads them.
    const [key, value] = term.split(/==?/).map((part) => part.trim());
    if (value !== undefined) return labels?.[key!] === value;
    if (key!.startsWith('!')) return labels?.[key!.slice(1)] === undefined;
    return labels?.[key!] !== undefined;
  });
}

/**
 * `fetchArtifacts`: an init container whose env reads ARTIFACT_URL from a Secret really fetches it
 * (as its `wget` would); anything but a 200 gzip fails the init container with exit code 1.
 */
export async function startFakeKubernetesApi(options: { tickMs?: number; fetchArtifacts?: boolean } = {}): Promise<FakeKubernetesApi> {
  const token = `fake-${randomUUID()}`;
  const store = new Map<string, Json>();
  const pods = new Map<string, Pod>();
  const requests: RecordedRequest[] = [];
  const events = new EventEmitter().setMaxListeners(0);
  let resourceVersion = 1000;
  let held = false;
  let podSerial = 0;

  const key = (kind: string, namespace: string, name: string) => `${kind}/${namespace}/${name}`;
  const now = () => new Date().toISOString().replace(/\.\d+Z$/, 'Z');
  const stamp = (object: Json, namespace: string) => {
    object.metadata ??= {};
    object.metadata.namespace = namespace;
    object.metadata.resourceVersion = String(++resourceVersion);
  };

  const api: FakeKubernetesApi = {
    url: '',
    podMetrics: new Map(),
    fetches: [],
    token,
    requests,
    podOutcome: () => ({ kind: 'ready' }),
    jobOutcome: () => ({ kind: 'exit', exitCode: 0, output: '' }),
    kubeconfig(namespace = 'default') {
      return [
        'apiVersion: v1',
        'kind: Config',
        'clusters:',
        '- name: fake',
        `  cluster: {server: "${api.url}", insecure-skip-tls-verify: true}`,
        'users:',
        '- name: fake',
        `  user: {token: "${token}"}`,
        'contexts:',
        '- name: fake',
        `  context: {cluster: fake, user: fake, namespace: ${namespace}}`,
        'current-context: fake',
        '',
      ].join('\n');
    },
    get(kind, name, namespace = 'default') {
      const found = kind === 'pods' ? [...pods.values()].find((pod) => pod.object.metadata.name === name)?.object : store.get(key(kind, namespace, name));
      return found ? structuredClone(found) : null;
    },
    list(kind, namespace = 'default') {
      if (kind === 'pods') return [...pods.values()].filter((pod) => pod.object.metadata.namespace === namespace).map((pod) => structuredClone(pod.object));
      return [...store.entries()].filter(([k]) => k.startsWith(`${kind}/${namespace}/`)).map(([, object]) => structuredClone(object));
    },
    hold() {
      held = true;
    },
    release() {
      held = false;
    },
    tick,
    nextRequest(method, path) {
      return new Promise((resolve) => {
        const listener = (request: RecordedRequest) => {
          if (request.method !== method || !path.test(request.path)) return;
          events.off('request', listener);
          resolve(request);
        };
        events.on('request', listener);
      });
    },
    async close() {
      clearInterval(timer);
      server.closeAllConnections();
      server.close();
      await once(server, 'close');
    },
  };

  function templateHash(template: Json): string {
    return createHash('sha256').update(JSON.stringify(template)).digest('hex').slice(0, 10);
  }

  function newPod(owner: string, namespace: string, template: Json, hash: string): Pod {
    const name = `${owner.split('/')[1]}-${hash.slice(0, 5)}-${(++podSerial).toString(36).padStart(5, '0')}`;
    const spec = structuredClone(template.spec ?? {});
    const object: Json = {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: {
        name,
        namespace,
        uid: randomUUID(),
        labels: { ...template.metadata?.labels, 'pod-template-hash': hash },
        annotations: { ...template.metadata?.annotations },
        creationTimestamp: now(),
      },
      spec,
      status: {
        phase: 'Pending',
        conditions: [{ type: 'PodScheduled', status: 'True' }],
        initContainerStatuses: (spec.initContainers ?? []).map((c: Json) => waitingStatus(c, 'PodInitializing')),
        containerStatuses: (spec.containers ?? []).map((c: Json) => waitingStatus(c, 'PodInitializing')),
      },
    };
    stamp(object, namespace);
    const pod: Pod = { object, owner, templateHash: hash, step: 0, fetched: null, runs: [] };
    pods.set(name, pod);
    const source = spec.initContainers?.[0]?.env?.find((one: Json) => one.name === 'ARTIFACT_URL')?.valueFrom?.secretKeyRef;
    if (options.fetchArtifacts && source) {
      const secret = store.get(key('secrets', namespace, source.name));
      const url = secret?.data?.[source.key] ? Buffer.from(secret.data[source.key], 'base64').toString('utf8') : '';
      void fetch(url)
        .then(async (response) => {
          const bytes = Buffer.from(await response.arrayBuffer());
          const gzip = bytes[0] === 0x1f && bytes[1] === 0x8b;
          api.fetches.push({ url, status: response.status, bytes: bytes.length, gzip });
          pod.fetched = { ok: response.status === 200 && gzip };
        })
        .catch(() => {
          api.fetches.push({ url, status: 0, bytes: 0, gzip: false });
          pod.fetched = { ok: false };
        });
    } else {
      pod.fetched = { ok: true };
    }
    return pod;
  }

  function waitingStatus(container: Json, reason: string, message?: string): Json {
    return { name: container.name, image: container.image, ready: false, restartCount: 0, state: { waiting: { reason, ...(message ? { message } : {}) } } };
  }

  /** One kubelet step of a Deployment's pod. */
  function advanceServing(pod: Pod): void {
    if (pod.fetched === null) return;
    const outcome: PodOutcome = pod.fetched.ok ? api.podOutcome(pod.object) : { kind: 'init-fails', exitCode: 1 };
    const status = pod.object.status;
    const app = status.containerStatuses[0];
    const init = status.initContainerStatuses[0];
    pod.step++;
    if (outcome.kind === 'image-pull') {
      status.containerStatuses[0] = { ...waitingStatus(pod.object.spec.containers[0], pod.step > 1 ? 'ImagePullBackOff' : 'ErrImagePull', `Back-off pulling image "${app.image}"`) };
      if (init) status.initContainerStatuses[0] = { ...init, ready: true, state: { terminated: { exitCode: 0, reason: 'Completed' } } };
      return;
    }
    if (outcome.kind === 'init-fails') {
      if (!init) return;
      status.initContainerStatuses[0] = {
        ...init,
        restartCount: pod.step - 1,
        state: pod.step > 1 ? { waiting: { reason: 'CrashLoopBackOff', message: 'back-off restarting failed container' } } : { terminated: { exitCode: outcome.exitCode, reason: 'Error' } },
        lastState: { terminated: { exitCode: outcome.exitCode, reason: 'Error' } },
      };
      status.containerStatuses[0] = waitingStatus(pod.object.spec.containers[0], 'PodInitializing');
      return;
    }
    if (init) status.initContainerStatuses[0] = { ...init, ready: true, state: { terminated: { exitCode: 0, reason: 'Completed' } } };
    if (pod.step === 1) {
      status.phase = 'Running';
      status.startTime = now();
      status.containerStatuses[0] = { ...app, state: { running: { startedAt: now() } }, ready: false };
      pod.runs.push((outcome.log ?? []).map((line) => ({ at: new Date().toISOString(), line })));
      return;
    }
    if (outcome.kind === 'ready') {
      status.containerStatuses[0] = { ...status.containerStatuses[0], ready: true };
      status.conditions = [
        { type: 'PodScheduled', status: 'True' },
        { type: 'Ready', status: 'True' },
      ];
      return;
    }
    // A crash: terminated, then CrashLoopBackOff with the last exit code, and a new run each time.
    const restarts = status.containerStatuses[0].restartCount ?? 0;
    status.containerStatuses[0] = {
      ...status.containerStatuses[0],
      ready: false,
      restartCount: restarts + 1,
      state: { waiting: { reason: 'CrashLoopBackOff', message: `back-off ${10 * 2 ** restarts}s restarting failed container=app pod=${pod.object.metadata.name}` } },
      lastState: { terminated: { exitCode: outcome.exitCode, reason: 'Error', finishedAt: now() } },
    };
    pod.runs.push((outcome.log ?? []).map((line) => ({ at: new Date().toISOString(), line })));
  }

  function ready(pod: Pod): boolean {
    return pod.object.status.containerStatuses.every((status: Json) => status.ready === true);
  }

  function reconcileDeployment(deployment: Json): void {
    const namespace = deployment.metadata.namespace;
    const owner = `deployment/${deployment.metadata.name}`;
    const wanted = deployment.spec.replicas ?? 1;
    const hash = templateHash(deployment.spec.template);
    const owned = [...pods.values()].filter((pod) => pod.owner === owner && pod.object.metadata.namespace === namespace);
    const current = owned.filter((pod) => pod.templateHash === hash);
    const old = owned.filter((pod) => pod.templateHash !== hash);
    if (wanted === 0) {
      for (const pod of owned) pods.delete(pod.object.metadata.name);
    } else {
      for (const pod of current) advanceServing(pod);
      for (let i = current.length; i < wanted; i++) current.push(newPod(owner, namespace, deployment.spec.template, hash));
      for (const pod of current.slice(wanted)) pods.delete(pod.object.metadata.name);
      // maxUnavailable 0: the old pods go only once the new ones are ready.
      if (current.slice(0, wanted).every(ready)) for (const pod of old) pods.delete(pod.object.metadata.name);
    }
    const left = [...pods.values()].filter((pod) => pod.owner === owner);
    const updated = left.filter((pod) => pod.templateHash === hash);
    const readyCount = left.filter(ready).length;
    deployment.status = {
      observedGeneration: deployment.metadata.generation,
      replicas: left.length,
      updatedReplicas: updated.length,
      readyReplicas: readyCount,
      availableReplicas: readyCount,
      unavailableReplicas: Math.max(0, wanted - readyCount),
    };
  }

  function reconcileJob(job: Json): void {
    const namespace = job.metadata.namespace;
    const owner = `job/${job.metadata.name}`;
    let pod = [...pods.values()].find((one) => one.owner === owner);
    if (!pod) {
      if (job.status?.succeeded || job.status?.failed) return;
      pod = newPod(owner, namespace, job.spec.template, templateHash(job.spec.template));
      job.status = { active: 1, startTime: now() };
      return;
    }
    if (pod.object.status.phase === 'Succeeded' || pod.object.status.phase === 'Failed') return;
    const outcome = api.jobOutcome(pod.object);
    const status = pod.object.status;
    if (status.initContainerStatuses[0]) status.initContainerStatuses[0] = { ...status.initContainerStatuses[0], state: { terminated: { exitCode: 0, reason: 'Completed' } } };
    if (outcome.kind === 'hang') {
      if (pod.runs.length === 0) pod.runs.push([]);
      status.phase = 'Running';
      status.containerStatuses[0] = { ...status.containerStatuses[0], state: { running: { startedAt: now() } } };
      return;
    }
    status.phase = outcome.exitCode === 0 ? 'Succeeded' : 'Failed';
    status.containerStatuses[0] = { ...status.containerStatuses[0], state: { terminated: { exitCode: outcome.exitCode, reason: outcome.exitCode === 0 ? 'Completed' : 'Error' } } };
    pod.runs.push(
      outcome.output
        .split('\n')
        .filter((line, i, all) => line !== '' || i < all.length - 1)
        .map((line) => ({ at: new Date().toISOString(), line })),
    );
    const done = outcome.exitCode === 0 ? 'Complete' : 'Failed';
    job.status = {
      startTime: job.status?.startTime,
      completionTime: now(),
      [outcome.exitCode === 0 ? 'succeeded' : 'failed']: 1,
      conditions: [{ type: done, status: 'True', ...(done === 'Failed' ? { reason: 'BackoffLimitExceeded' } : {}) }],
    };
  }

  function tick(): void {
    for (const [k, object] of store) {
      if (k.startsWith('deployments/')) reconcileDeployment(object);
      if (k.startsWith('jobs/')) reconcileJob(object);
    }
  }

  const timer = setInterval(() => {
    if (!held) tick();
  }, options.tickMs ?? 20);

  function create(kind: string, namespace: string, body: Json): Json {
    const name = body.metadata?.name;
    if (!name) throw new HttpStatus(422, 'Invalid', `${KINDS[kind]!.kind} "" is invalid: metadata.name: Required value`);
    if (store.has(key(kind, namespace, name))) throw new HttpStatus(409, 'AlreadyExists', `${kind} "${name}" already exists`, { name, kind });
    const object = structuredClone(body);
    object.apiVersion = KINDS[kind]!.apiVersion;
    object.kind = KINDS[kind]!.kind;
    stamp(object, namespace);
    object.metadata.uid = randomUUID();
    object.metadata.creationTimestamp = now();
    if (kind === 'deployments' || kind === 'jobs') object.metadata.generation = 1;
    if (kind === 'secrets') encodeSecret(object);
    if (kind === 'services') object.spec = { ...object.spec, clusterIP: `10.96.0.${(resourceVersion % 250) + 2}` };
    if (kind === 'deployments') object.status = {};
    store.set(key(kind, namespace, name), object);
    return object;
  }

  function encodeSecret(secret: Json): void {
    const data: Json = { ...secret.data };
    for (const [name, value] of Object.entries(secret.stringData ?? {})) data[name] = Buffer.from(String(value)).toString('base64');
    delete secret.stringData;
    secret.data = data;
  }

  function replace(kind: string, namespace: string, name: string, body: Json): Json {
    const existing = store.get(key(kind, namespace, name));
    if (!existing) throw new HttpStatus(404, 'NotFound', `${kind} "${name}" not found`, { name, kind });
    const sent = body.metadata?.resourceVersion;
    if (sent && sent !== existing.metadata.resourceVersion) {
      throw new HttpStatus(
        409,
        'Conflict',
        `Operation cannot be fulfilled on ${kind} "${name}": the object has been modified; please apply your changes to the latest version and try again`,
        { name, kind },
      );
    }
    const object = structuredClone(body);
    object.apiVersion = KINDS[kind]!.apiVersion;
    object.kind = KINDS[kind]!.kind;
    object.metadata = { ...object.metadata, uid: existing.metadata.uid, creationTimestamp: existing.metadata.creationTimestamp, name };
    stamp(object, namespace);
    if (kind === 'secrets') encodeSecret(object);
    if (kind === 'deployments') {
      const changed = JSON.stringify(object.spec) !== JSON.stringify(existing.spec);
      object.metadata.generation = existing.metadata.generation + (changed ? 1 : 0);
      object.status = existing.status;
    }
    store.set(key(kind, namespace, name), object);
    return object;
  }

  function remove(kind: string, namespace: string, name: string): Json {
    const k = key(kind, namespace, name);
    const existing = store.get(k);
    if (kind === 'pods') {
      if (!pods.delete(name)) throw new HttpStatus(404, 'NotFound', `pods "${name}" not found`, { name, kind });
      return { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Success', details: { name, kind } };
    }
    if (!existing) throw new HttpStatus(404, 'NotFound', `${kind} "${name}" not found`, { name, kind });
    store.delete(k);
    const owner = kind === 'deployments' ? `deployment/${name}` : kind === 'jobs' ? `job/${name}` : null;
    if (owner) for (const [podName, pod] of pods) if (pod.owner === owner) pods.delete(podName);
    return { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Success', details: { name, kind, uid: existing.metadata.uid } };
  }

  function podLog(name: string, query: URLSearchParams): string {
    const pod = pods.get(name);
    if (!pod) throw new HttpStatus(404, 'NotFound', `pods "${name}" not found`, { name, kind: 'pods' });
    const container = query.get('container');
    if (container && container !== pod.object.spec.containers[0].name) {
      throw new HttpStatus(400, 'BadRequest', `container ${container} is not valid for pod ${name}`);
    }
    const runs = pod.runs;
    const run = query.get('previous') === 'true' ? runs[runs.length - 2] : runs[runs.length - 1];
    if (!run) {
      if (query.get('previous') === 'true') throw new HttpStatus(400, 'BadRequest', `previous terminated container "app" in pod "${name}" not found`);
      throw new HttpStatus(400, 'BadRequest', `container "app" in pod "${name}" is waiting to start: PodInitializing`);
    }
    const sinceSeconds = Number(query.get('sinceSeconds') ?? 0);
    const from = sinceSeconds > 0 ? Date.now() - sinceSeconds * 1000 : 0;
    const lines = run.filter((entry) => Date.parse(entry.at) >= from);
    const timestamps = query.get('timestamps') === 'true';
    return lines.map((entry) => `${timestamps ? `${entry.at.replace('Z', '000000Z')} ` : ''}${entry.line}\n`).join('');
  }

  function podMetricsList(namespace: string, selector: string | null): Json {
    if (!api.podMetrics) throw new HttpStatus(404, 'NotFound', 'the server could not find the requested resource');
    const items = api
      .list('pods', namespace)
      .filter((pod) => pod.status?.phase === 'Running' && matches(pod.metadata?.labels, selector))
      .flatMap((pod) => {
        const usage = api.podMetrics!.get(pod.metadata.name);
        if (!usage) return [];
        const { cpu, memory, timestamp, window } = usage;
        const containers = pod.spec.containers.map((container: Json) => ({ name: container.name, usage: { cpu, memory } }));
        return [{ metadata: { name: pod.metadata.name, namespace, labels: pod.metadata.labels }, timestamp, window, containers }];
      });
    return { kind: 'PodMetricsList', apiVersion: 'metrics.k8s.io/v1beta1', metadata: {}, items };
  }

  async function handle(request: IncomingMessage, response: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const chunk of request) chunks.push(chunk as Buffer);
    const body = Buffer.concat(chunks).toString('utf8');
    const url = new URL(request.url ?? '/', 'http://fake.invalid');
    const recorded: RecordedRequest = { method: request.method ?? 'GET', path: url.pathname + url.search, body };
    requests.push(recorded);
    events.emit('request', recorded);
    const send = (code: number, payload: Json | string) => {
      const text = typeof payload === 'string' ? payload : JSON.stringify(payload);
      response.writeHead(code, { 'content-type': typeof payload === 'string' ? 'text/plain' : 'application/json' });
      response.end(text);
    };
    try {
      if (request.headers.authorization !== `Bearer ${token}`) throw new HttpStatus(401, 'Unauthorized', 'Unauthorized');
      const metrics = /^\/apis\/metrics\.k8s\.io\/v1beta1\/namespaces\/([^/]+)\/pods$/.exec(url.pathname);
      if (metrics) return send(200, podMetricsList(metrics[1]!, url.searchParams.get('labelSelector')));
      const match = /^\/(?:api\/v1|apis\/apps\/v1|apis\/batch\/v1)\/namespaces\/([^/]+)\/([a-z]+)(?:\/([^/]+))?(?:\/(log))?$/.exec(url.pathname);
      const group = url.pathname.startsWith('/apis/apps/v1') ? '/apis/apps/v1' : url.pathname.startsWith('/apis/batch/v1') ? '/apis/batch/v1' : '/api/v1';
      if (!match || !KINDS[match[2]!] || KINDS[match[2]!]!.group !== group) throw new HttpStatus(404, 'NotFound', `the server could not find the requested resource`);
      const [, namespace, kind, name, log] = match as unknown as [string, string, string, string | undefined, string | undefined];
      const method = request.method;
      if (log) {
        if (kind !== 'pods' || method !== 'GET' || !name) throw new HttpStatus(405, 'MethodNotAllowed', 'the server does not allow this method on the requested resource');
        return send(200, podLog(name, url.searchParams));
      }
      if (!name && method === 'GET') {
        const selector = url.searchParams.get('labelSelector');
        const items = api.list(kind, namespace).filter((object) => matches(object.metadata?.labels, selector));
        return send(200, { kind: `${KINDS[kind]!.kind}List`, apiVersion: KINDS[kind]!.apiVersion, metadata: { resourceVersion: String(resourceVersion) }, items });
      }
      if (!name && method === 'POST') {
        if (kind === 'pods') throw new HttpStatus(405, 'MethodNotAllowed', 'pods are made by their controllers here');
        return send(201, create(kind, namespace, JSON.parse(body) as Json));
      }
      if (name && method === 'GET') {
        const found = api.get(kind, name, namespace);
        if (!found) throw new HttpStatus(404, 'NotFound', `${kind} "${name}" not found`, { name, kind });
        return send(200, found);
      }
      if (name && method === 'PUT') return send(200, replace(kind, namespace, name, JSON.parse(body) as Json));
      if (name && method === 'DELETE') return send(200, remove(kind, namespace, name));
      throw new HttpStatus(405, 'MethodNotAllowed', 'the server does not allow this method on the requested resource');
    } catch (error) {
      if (error instanceof HttpStatus) return send(error.code, statusBody(error.code, error.reason, error.message, error.details));
      send(500, statusBody(500, 'InternalError', (error as Error).message, {}));
    }
  }

  const server = createServer((request, response) => {
    handle(request, response).catch(() => response.destroy());
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  api.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return api;
}
