import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import t from 'tap';
import { ANNOTATION_ENV_SHA256, ANNOTATION_RESTARTED_AT, LABEL_ONE_OFF } from '../../../../plugins/apps/runtime/kubernetes-objects.ts';
import { KubernetesRuntime, type KubernetesRuntimeOptions } from '../../../../plugins/apps/runtime/kubernetes-runtime.ts';
import { HealthFailure, type RouteChange, RuntimeError } from '../../../../plugins/apps/runtime/runtime-port.ts';
import { type FakeKubernetesApi, startFakeKubernetesApi } from '../../../fakes/fake-kubernetes-api.ts';
import type { TapLike } from '../../../helpers/app.ts';

/**
 * The kubernetes runtime through the real client (`@kubernetes/client-node`) and a kubeconfig file,
 * against the fake API server of test/fakes (no real cluster in CI): the objects it writes, the
 * rollouts it waits for, and what it reports when a rollout fails.
 */
t.setTimeout(60_000);

const NAMESPACE = 'apps';

async function cluster(t: TapLike, options: Partial<KubernetesRuntimeOptions> = {}) {
  const fake = await startFakeKubernetesApi({ tickMs: 10 });
  t.teardown(() => fake.close());
  const dir = await mkdtemp(path.join(tmpdir(), 'kube-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const kubeconfig = path.join(dir, 'config');
  await writeFile(kubeconfig, fake.kubeconfig(NAMESPACE));
  const runtime = KubernetesRuntime.fromFile(kubeconfig, {
    namespace: NAMESPACE,
    baseImage: 'node:20-bookworm-slim',
    artifactUrl: async (deploymentId) => `http://svc.example:8080/apps-artifacts/${deploymentId}?expires=1&signature=abc`,
    rolloutTimeoutMs: 1_500,
    pollMs: 10,
    ...options,
  });
  t.teardown(() => runtime.close());
  const routes: RouteChange[] = [];
  runtime.onChange((change) => routes.push(change));
  return { fake, runtime, routes };
}

function deployRequest(deploymentId: string, env: Record<string, string> = {}, startCommand = 'node server.js') {
  return { serviceId: 'svc-1', deploymentId, artifactDir: '/unused/in/kubernetes', startCommand, env };
}

function secretValue(fake: FakeKubernetesApi, name: string, key: string): string | null {
  const data = fake.get('secrets', name, NAMESPACE)?.['data'] as Record<string, string> | undefined;
  return data?.[key] === undefined ? null : Buffer.from(data[key], 'base64').toString('utf8');
}

function template(fake: FakeKubernetesApi) {
  return fake.get('deployments', 'app-svc-1', NAMESPACE)?.['spec']?.template;
}

t.test('a deploy writes a Deployment that never drops the old pod, a Service and the env Secret, and resolves once available', async (t) => {
  const { fake, runtime, routes } = await cluster(t);
  fake.hold();
  let resolved = false;
  const deploying = runtime.deploy(deployRequest('dep-1', { GREETING: 'hello' })).then((instance) => {
    resolved = true;
    return instance;
  });
  await fake.nextRequest('POST', /\/apis\/apps\/v1\/namespaces\/apps\/deployments$/);
  await fake.nextRequest('GET', /deployments\/app-svc-1$/);
  fake.tick();
  await fake.nextRequest('GET', /deployments\/app-svc-1$/);
  t.equal(resolved, false, 'not resolved while the pod is not ready');
  fake.release();
  const instance = await deploying;
  t.equal(instance.target, 'app-svc-1.apps.svc.cluster.local:8080');
  t.equal(instance.pid, null);
  t.equal(instance.sandbox, 'container');
  t.same(routes, [{ serviceId: 'svc-1', deploymentId: 'dep-1', target: 'app-svc-1.apps.svc.cluster.local:8080' }]);
  const deployment = fake.get('deployments', 'app-svc-1', NAMESPACE)!;
  t.same(deployment['spec'].strategy, { type: 'RollingUpdate', rollingUpdate: { maxUnavailable: 0, maxSurge: 1 } });
  t.equal(deployment['status'].availableReplicas, 1);
  const pod = deployment['spec'].template.spec;
  t.equal(pod.initContainers[0].env[0].valueFrom.secretKeyRef.name, 'app-svc-1-artifact', 'the artifact URL is read from a Secret');
  t.same(pod.containers[0].command, ['/bin/sh', '-c', 'node server.js']);
  t.equal(pod.containers[0].image, 'node:20-bookworm-slim');
  t.same(pod.containers[0].envFrom, [{ secretRef: { name: 'app-svc-1-env' } }]);
  t.equal(secretValue(fake, 'app-svc-1-env', 'GREETING'), 'hello');
  t.match(secretValue(fake, 'app-svc-1-artifact', 'url'), /\/apps-artifacts\/dep-1\?/);
  t.equal(fake.get('services', 'app-svc-1', NAMESPACE)?.['spec'].ports[0].port, 8080);
});

t.test('the env values travel only in the Secret: the Deployment carries their digest', async (t) => {
  const { fake, runtime } = await cluster(t);
  await runtime.deploy(deployRequest('dep-1', { API_TOKEN: 'very-secret-value' }));
  const carrying = fake.requests.filter((request) => request.body.includes('very-secret-value'));
  t.ok(carrying.length > 0);
  t.ok(
    carrying.every((request) => /\/secrets/.test(request.path)),
    'only Secret requests carry the value',
  );
});

t.test('an env change rolls the pods: the Secret is updated and the template annotations bumped', async (t) => {
  const { fake, runtime } = await cluster(t);
  await runtime.deploy(deployRequest('dep-1', { MODE: 'one' }));
  const before = template(fake);
  const podBefore = fake.list('pods', NAMESPACE)[0]!;
  await runtime.deploy(deployRequest('dep-1', { MODE: 'two' }));
  const after = template(fake);
  t.equal(secretValue(fake, 'app-svc-1-env', 'MODE'), 'two');
  t.not(after.metadata.annotations[ANNOTATION_ENV_SHA256], before.metadata.annotations[ANNOTATION_ENV_SHA256]);
  t.not(after.metadata.annotations[ANNOTATION_RESTARTED_AT], before.metadata.annotations[ANNOTATION_RESTARTED_AT]);
  const pods = fake.list('pods', NAMESPACE);
  t.equal(pods.length, 1, 'the old pod went once the new one was ready');
  t.not(pods[0]!['metadata'].name, podBefore['metadata'].name, 'a new pod serves');
});

t.test('stop scales to 0 and unroutes; start scales to 1, bumps the annotation and routes again', async (t) => {
  const { fake, runtime, routes } = await cluster(t);
  await runtime.deploy(deployRequest('dep-1'));
  const restartedAt = template(fake).metadata.annotations[ANNOTATION_RESTARTED_AT];
  await runtime.stop('svc-1');
  t.equal(fake.get('deployments', 'app-svc-1', NAMESPACE)?.['spec'].replicas, 0);
  t.same(routes.at(-1), { serviceId: 'svc-1', deploymentId: null, target: null });
  t.equal((await runtime.status('svc-1')).state, 'stopped');
  await new Promise((resolve) => setImmediate(resolve));
  const started = await runtime.start('svc-1');
  t.equal(fake.get('deployments', 'app-svc-1', NAMESPACE)?.['spec'].replicas, 1);
  t.not(template(fake).metadata.annotations[ANNOTATION_RESTARTED_AT], restartedAt);
  t.equal(started.deploymentId, 'dep-1');
  t.same(routes.at(-1), { serviceId: 'svc-1', deploymentId: 'dep-1', target: 'app-svc-1.apps.svc.cluster.local:8080' });
  const status = await runtime.status('svc-1');
  t.equal(status.state, 'running');
  t.same(
    status.instances.map((one) => one.deploymentId),
    ['dep-1'],
  );
});

t.test('stop and start of a service never deployed are refused', async (t) => {
  const { runtime } = await cluster(t);
  await t.rejects(runtime.stop('svc-none'), RuntimeError);
  await t.rejects(runtime.start('svc-none'), { code: 'nothing_deployed' });
});

t.test('a rollout that crashes fails with the pod reason and its last lines, and the previous deployment keeps serving', async (t) => {
  const { fake, runtime, routes } = await cluster(t, { rolloutTimeoutMs: 400 });
  fake.podOutcome = (pod) =>
    pod['spec'].containers[0].command.join(' ').includes('crash') ? { kind: 'crash', exitCode: 3, log: ['booting', 'Error: missing DATABASE_URL'] } : { kind: 'ready' };
  await runtime.deploy(deployRequest('dep-1', { V: '1' }));
  const servingPod = fake.list('pods', NAMESPACE)[0]!['metadata'].name;
  const failure = await runtime.deploy(deployRequest('dep-2', { V: '2' }, 'node crash.js')).catch((error: unknown) => error);
  t.type(failure, HealthFailure);
  const health = failure as HealthFailure;
  t.match(health.probe, /^rollout not available after 0\.4s: pod app-svc-1-\S+: container app: CrashLoopBackOff/);
  t.match(health.probe, /last exit code 3/);
  t.equal(health.exitCode, 3);
  t.same(health.lastLines, ['booting', 'Error: missing DATABASE_URL']);
  t.equal(routes.length, 1, 'no switch to the failed deployment');
  t.equal(template(fake).metadata.labels['apps.svc.dev/deployment'], 'dep-1', 'the template is the previous one again');
  t.equal(secretValue(fake, 'app-svc-1-env', 'V'), '1', 'the previous env is back');
  await t.resolves(async () => {
    for (;;) {
      const names = fake.list('pods', NAMESPACE).map((pod) => pod['metadata'].name);
      if (names.length === 1 && names[0] === servingPod) return;
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
  }, 'only the old pod is left');
});

t.test('a first deploy whose image cannot be pulled reports ImagePullBackOff and leaves nothing behind', async (t) => {
  const { fake, runtime } = await cluster(t, { rolloutTimeoutMs: 300, baseImage: 'registry.invalid/none:1' });
  fake.podOutcome = () => ({ kind: 'image-pull' });
  const failure = await runtime.deploy(deployRequest('dep-1')).catch((error: unknown) => error);
  t.type(failure, HealthFailure);
  t.match((failure as HealthFailure).probe, /ImagePullBackOff \(Back-off pulling image "registry\.invalid\/none:1"\)/);
  t.same(fake.list('deployments', NAMESPACE), []);
  t.same(fake.list('services', NAMESPACE), []);
  t.same(fake.list('secrets', NAMESPACE), []);
});

t.test('an artifact that cannot be fetched reports the init container failing', async (t) => {
  const { fake, runtime } = await cluster(t, { rolloutTimeoutMs: 300 });
  fake.podOutcome = () => ({ kind: 'init-fails', exitCode: 1 });
  const failure = await runtime.deploy(deployRequest('dep-1')).catch((error: unknown) => error);
  t.match((failure as HealthFailure).probe, /init container fetch-artifact: CrashLoopBackOff/);
});

t.test('retire of the running deployment deletes its Deployment, Service, Secrets and pods', async (t) => {
  const { fake, runtime, routes } = await cluster(t);
  await runtime.deploy(deployRequest('dep-1', { A: 'b' }));
  await runtime.retire('dep-0-unknown');
  t.equal(fake.list('deployments', NAMESPACE).length, 1, 'another deployment id deletes nothing');
  await runtime.retire('dep-1');
  for (const kind of ['deployments', 'services', 'secrets', 'pods']) t.same(fake.list(kind, NAMESPACE), [], `no ${kind} left`);
  t.same(routes.at(-1), { serviceId: 'svc-1', deploymentId: null, target: null });
  t.same(await runtime.status('svc-1'), { serviceId: 'svc-1', state: 'stopped', deploymentId: null, instances: [] });
});

t.test('run is a Job beside the app: its exit code and output, the Job deleted after', async (t) => {
  const { fake, runtime } = await cluster(t);
  await t.rejects(runtime.run('svc-1', 'echo hi', { timeoutMs: 1_000 }), { code: 'nothing_deployed' });
  await runtime.deploy(deployRequest('dep-1', { A: 'b' }));
  let jobPod: Record<string, any> | null = null;
  fake.jobOutcome = (pod) => {
    jobPod = pod;
    return { kind: 'exit', exitCode: 7, output: 'migrating\nfailed: table exists\n' };
  };
  const result = await runtime.run('svc-1', 'npm run migrate', { timeoutMs: 5_000 });
  t.same(result, { exitCode: 7, signal: null, timedOut: false, output: 'migrating\nfailed: table exists\n' });
  const container = jobPod!['spec'].containers[0];
  t.same(container.command, ['/bin/sh', '-c', 'npm run migrate']);
  t.notOk(
    container.env.some((one: { name: string }) => one.name === 'PORT'),
    'no PORT of its own',
  );
  t.same(container.envFrom, [{ secretRef: { name: 'app-svc-1-env' } }]);
  t.ok(jobPod!['metadata'].labels[LABEL_ONE_OFF]);
  t.same(fake.list('jobs', NAMESPACE), [], 'the Job is deleted');
});

t.test('a one-off past its timeout reports timedOut without an exit code', async (t) => {
  const { fake, runtime } = await cluster(t);
  await runtime.deploy(deployRequest('dep-1'));
  fake.jobOutcome = () => ({ kind: 'hang' });
  const result = await runtime.run('svc-1', 'sleep 1000', { timeoutMs: 200 });
  t.equal(result.timedOut, true);
  t.equal(result.exitCode, null);
  t.same(fake.list('jobs', NAMESPACE), []);
});

t.test('logs are the pods logs, timestamped, from since', async (t) => {
  const { fake, runtime } = await cluster(t);
  fake.podOutcome = () => ({ kind: 'ready', log: ['listening on 8080', 'GET / 200'] });
  await runtime.deploy(deployRequest('dep-1'));
  const lines = [];
  for await (const line of runtime.logs('svc-1')) lines.push(line);
  t.same(
    lines.map((one) => [one.deploymentId, one.stream, one.line]),
    [
      ['dep-1', 'stdout', 'listening on 8080'],
      ['dep-1', 'stdout', 'GET / 200'],
    ],
  );
  t.ok(lines.every((one) => !Number.isNaN(Date.parse(one.at))));
  const later = [];
  for await (const line of runtime.logs('svc-1', { since: new Date(Date.now() + 60_000) })) later.push(line);
  t.same(later, [], 'nothing after a later since');
});

t.test('a kubeconfig whose token the server refuses fails the deploy with the API error', async (t) => {
  const fake = await startFakeKubernetesApi();
  t.teardown(() => fake.close());
  const dir = await mkdtemp(path.join(tmpdir(), 'kube-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const kubeconfig = path.join(dir, 'config');
  await writeFile(kubeconfig, fake.kubeconfig(NAMESPACE).replace(fake.token, 'wrong'));
  const runtime = KubernetesRuntime.fromFile(kubeconfig, { namespace: NAMESPACE, baseImage: 'x', artifactUrl: async () => 'http://a' });
  await t.rejects(runtime.deploy(deployRequest('dep-1')), { code: 401 });
});

/** The service's serving pod (not a one-off), once running. */
function servingPod(fake: FakeKubernetesApi): Record<string, any> {
  const pod = fake.list('pods', NAMESPACE).find((one) => one['status']?.phase === 'Running' && !one['metadata'].labels[LABEL_ONE_OFF]);
  if (!pod) throw new Error('no serving pod');
  return pod;
}

t.test('usage comes from the metrics API: memory as read, CPU time integrated from its rates', async (t) => {
  const { fake, runtime } = await cluster(t);
  await runtime.deploy(deployRequest('dep-1'));
  const pod = servingPod(fake);
  const started = Date.parse(pod['status'].startTime);
  const at = (ms: number) => new Date(started + ms).toISOString();
  fake.podMetrics!.set(pod['metadata'].name, { cpu: '250m', memory: '64Mi', timestamp: at(60_000), window: '30s' });
  const first = await runtime.usage();
  t.same(first, [
    {
      serviceId: 'svc-1',
      deploymentId: 'dep-1',
      instance: `${pod['metadata'].name}@${new Date(started).toISOString()}`,
      startedAt: new Date(started).toISOString(),
      memoryBytes: 64 * 1024 * 1024,
      cpuMs: 7_500,
      processes: 1,
    },
  ]);
  fake.podMetrics!.set(pod['metadata'].name, { cpu: '500m', memory: '80Mi', timestamp: at(70_000), window: '30s' });
  t.match(await runtime.usage(), [{ cpuMs: 12_500, memoryBytes: 80 * 1024 * 1024 }], '0.5 core over the 10 s since the last reading');
  t.match(await runtime.usage(), [{ cpuMs: 12_500 }], 'the same reading again adds nothing');
});

t.test('a first reading counts no more CPU time than the pod has lived', async (t) => {
  const { fake, runtime } = await cluster(t);
  await runtime.deploy(deployRequest('dep-1'));
  const pod = servingPod(fake);
  const timestamp = new Date(Date.parse(pod['status'].startTime) + 4_000).toISOString();
  fake.podMetrics!.set(pod['metadata'].name, { cpu: '1', memory: '1Mi', timestamp, window: '1m0s' });
  t.match(await runtime.usage(), [{ cpuMs: 4_000 }]);
});

t.test('a one-off beside the app is no instance of it', async (t) => {
  const { fake, runtime } = await cluster(t);
  await runtime.deploy(deployRequest('dep-1'));
  const app = servingPod(fake);
  fake.jobOutcome = () => ({ kind: 'hang' });
  const running = runtime.run('svc-1', 'sleep 60', { timeoutMs: 3_000 });
  await fake.nextRequest('GET', /pods\?.*one-off/);
  const reading = { cpu: '100m', memory: '10Mi', timestamp: new Date().toISOString(), window: '30s' };
  for (const pod of fake.list('pods', NAMESPACE)) fake.podMetrics!.set(pod['metadata'].name, reading);
  t.same(
    (await runtime.usage()).map((usage) => usage.instance.split('@')[0]),
    [app['metadata'].name],
  );
  t.match(await running, { timedOut: true });
});

t.test('a cluster without the metrics API gives no usage and says so once', async (t) => {
  const warnings: string[] = [];
  const { fake, runtime } = await cluster(t, { warn: (message) => warnings.push(message) });
  await runtime.deploy(deployRequest('dep-1'));
  fake.podMetrics = null;
  t.same(await runtime.usage(), []);
  t.same(await runtime.usage(), []);
  t.equal(warnings.length, 1);
  t.match(warnings[0], /metrics-server/);
});
