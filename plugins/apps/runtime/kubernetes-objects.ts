import { createHash } from 'node:crypto';
import type { V1Deployment, V1Job, V1PodSpec, V1Secret, V1Service } from '@kubernetes/client-node';
import type { RuntimeLimits } from './runtime-port.ts';

/**
 * The objects the `kubernetes` runtime keeps per service (README.md beside this file): names, labels
 * and the manifests. Pure functions of their inputs, so the runtime and its tests build the same.
 */

export const MANAGED_BY = 'svc-apps';
export const LABEL_SERVICE = 'apps.svc.dev/service';
export const LABEL_DEPLOYMENT = 'apps.svc.dev/deployment';
/** On a one-off's Job and its pod: the Job's name. */
export const LABEL_ONE_OFF = 'apps.svc.dev/one-off';
/** Bumped on every deploy and start: a new ReplicaSet, so the pods roll even when nothing else changed. */
export const ANNOTATION_RESTARTED_AT = 'apps.svc.dev/restarted-at';
/** The env's digest (never its values): an env change alone rolls the pods. */
export const ANNOTATION_ENV_SHA256 = 'apps.svc.dev/env-sha256';

const APP_CONTAINER = 'app';
const FETCH_CONTAINER = 'fetch-artifact';
const ARTIFACT_KEY = 'url';

export interface ObjectSettings {
  namespace: string;
  baseImage: string;
  /** The init container's image: needs `sh`, `wget` and `tar` (busybox has them). */
  fetchImage: string;
  /** The port the app listens on inside its pod (PORT), and the Service's port. */
  containerPort: number;
  clusterDomain: string;
}

/** `app-<service id>`: a DNS-1123 label (lower case, digits and `-`, at most 63 characters). */
export function objectName(serviceId: string): string {
  const cleaned = serviceId
    .toLowerCase()
    .replace(/[^a-z0-9-]/g, '-')
    .replace(/^-+|-+$/g, '');
  return `app-${cleaned}`.slice(0, 63).replace(/-+$/, '');
}

export function envSecretName(serviceId: string): string {
  return `${objectName(serviceId)}-env`.slice(0, 253);
}

export function artifactSecretName(serviceId: string): string {
  return `${objectName(serviceId)}-artifact`.slice(0, 253);
}

/** What the proxy forwards to: the Service's cluster DNS name and port. */
export function targetOf(serviceId: string, settings: ObjectSettings): string {
  return `${objectName(serviceId)}.${settings.namespace}.svc.${settings.clusterDomain}:${settings.containerPort}`;
}

export function selectorOf(serviceId: string): Record<string, string> {
  return { 'app.kubernetes.io/managed-by': MANAGED_BY, [LABEL_SERVICE]: labelValue(serviceId) };
}

/** A label value: at most 63 of `[A-Za-z0-9._-]`, starting and ending alphanumeric. */
export function labelValue(value: string): string {
  return value
    .replace(/[^A-Za-z0-9._-]/g, '-')
    .slice(0, 63)
    .replace(/^[^A-Za-z0-9]+|[^A-Za-z0-9]+$/g, '');
}

export function envDigest(env: Readonly<Record<string, string>>): string {
  const sorted = Object.keys(env)
    .sort()
    .map((key) => [key, env[key]]);
  return createHash('sha256').update(JSON.stringify(sorted)).digest('hex');
}

function secret(name: string, serviceId: string, settings: ObjectSettings, data: Record<string, string>): V1Secret {
  return {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: { name, namespace: settings.namespace, labels: selectorOf(serviceId) },
    type: 'Opaque',
    stringData: data,
  };
}

export function envSecret(serviceId: string, settings: ObjectSettings, env: Readonly<Record<string, string>>): V1Secret {
  const data = { ...env };
  // PORT is the pod's: the runtime sets it, as the local runtime does.
  delete data['PORT'];
  return secret(envSecretName(serviceId), serviceId, settings, data);
}

export function artifactSecret(serviceId: string, settings: ObjectSettings, url: string): V1Secret {
  return secret(artifactSecretName(serviceId), serviceId, settings, { [ARTIFACT_KEY]: url });
}

export function serviceObject(serviceId: string, settings: ObjectSettings): V1Service {
  return {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: { name: objectName(serviceId), namespace: settings.namespace, labels: selectorOf(serviceId) },
    spec: {
      type: 'ClusterIP',
      selector: selectorOf(serviceId),
      ports: [{ name: 'http', port: settings.containerPort, targetPort: settings.containerPort, protocol: 'TCP' }],
    },
  };
}

export interface PodInputs {
  serviceId: string;
  deploymentId: string;
  startCommand: string;
  limits: RuntimeLimits;
  /** The port the app listens on; null for a one-off (no PORT). */
  port: number | null;
}

/**
 * The pod: an init container fetches the artifact (a signed, expiring URL read from its Secret) into
 * an emptyDir mounted at /app, the app runs its start command there in the base image, with the env
 * Secret as its variables.
 */
export function podSpec(settings: ObjectSettings, inputs: PodInputs, restartPolicy: 'Always' | 'Never'): V1PodSpec {
  const fetch = 'set -e; wget -q -O /tmp/artifact.tar.gz "$ARTIFACT_URL"; tar -xzf /tmp/artifact.tar.gz -C /app';
  const memory = inputs.limits.memoryBytes;
  return {
    restartPolicy,
    automountServiceAccountToken: false,
    enableServiceLinks: false,
    volumes: [
      { name: 'app', emptyDir: {} },
      { name: 'tmp', emptyDir: {} },
    ],
    initContainers: [
      {
        name: FETCH_CONTAINER,
        image: settings.fetchImage,
        command: ['/bin/sh', '-c', fetch],
        env: [{ name: 'ARTIFACT_URL', valueFrom: { secretKeyRef: { name: artifactSecretName(inputs.serviceId), key: ARTIFACT_KEY } } }],
        volumeMounts: [
          { name: 'app', mountPath: '/app' },
          { name: 'tmp', mountPath: '/tmp' },
        ],
      },
    ],
    containers: [
      {
        name: APP_CONTAINER,
        image: settings.baseImage,
        workingDir: '/app',
        command: ['/bin/sh', '-c', inputs.startCommand],
        env: [{ name: 'HOME', value: '/tmp' }, { name: 'TMPDIR', value: '/tmp' }, ...(inputs.port === null ? [] : [{ name: 'PORT', value: String(inputs.port) }])],
        envFrom: [{ secretRef: { name: envSecretName(inputs.serviceId) } }],
        ...(inputs.port === null ? {} : { ports: [{ name: 'http', containerPort: inputs.port, protocol: 'TCP' }] }),
        ...(inputs.port === null ? {} : { readinessProbe: { tcpSocket: { port: inputs.port }, periodSeconds: 2, failureThreshold: 3 } }),
        ...(memory ? { resources: { limits: { memory: String(memory) } } } : {}),
        volumeMounts: [
          { name: 'app', mountPath: '/app', readOnly: true },
          { name: 'tmp', mountPath: '/tmp' },
        ],
        securityContext: { allowPrivilegeEscalation: false, readOnlyRootFilesystem: true },
      },
    ],
  };
}

export function deploymentObject(settings: ObjectSettings, inputs: PodInputs & { env: Readonly<Record<string, string>>; restartedAt: string; replicas: number }): V1Deployment {
  const labels = { ...selectorOf(inputs.serviceId), [LABEL_DEPLOYMENT]: labelValue(inputs.deploymentId) };
  return {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name: objectName(inputs.serviceId), namespace: settings.namespace, labels },
    spec: {
      replicas: inputs.replicas,
      selector: { matchLabels: selectorOf(inputs.serviceId) },
      // The old pod serves until the new one is ready: a failing rollout never takes the app down.
      strategy: { type: 'RollingUpdate', rollingUpdate: { maxUnavailable: 0, maxSurge: 1 } },
      template: {
        metadata: {
          labels,
          annotations: {
            [ANNOTATION_RESTARTED_AT]: inputs.restartedAt,
            [ANNOTATION_ENV_SHA256]: envDigest(inputs.env),
          },
        },
        spec: podSpec(settings, inputs, 'Always'),
      },
    },
  };
}

export function jobObject(settings: ObjectSettings, name: string, inputs: PodInputs, timeoutMs: number): V1Job {
  const labels = { ...selectorOf(inputs.serviceId), [LABEL_DEPLOYMENT]: labelValue(inputs.deploymentId) };
  return {
    apiVersion: 'batch/v1',
    kind: 'Job',
    metadata: { name, namespace: settings.namespace, labels: { ...labels, [LABEL_ONE_OFF]: name } },
    spec: {
      backoffLimit: 0,
      activeDeadlineSeconds: Math.max(1, Math.ceil(timeoutMs / 1000)),
      ttlSecondsAfterFinished: 600,
      template: {
        // One-offs are not the Service's endpoints: no service label on their pods.
        metadata: { labels: { 'app.kubernetes.io/managed-by': MANAGED_BY, [LABEL_ONE_OFF]: name } },
        spec: podSpec(settings, inputs, 'Never'),
      },
    },
  };
}

export { APP_CONTAINER, FETCH_CONTAINER };
