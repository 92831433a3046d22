import { ApiException, type CoreV1Api, type CustomObjectsApi, type PodMetric, type PodMetricsList, type V1Pod } from '@kubernetes/client-node';
// Not re-exported by the package's index; the version is pinned in package.json.
import { quantityToScalar } from '@kubernetes/client-node/dist/util.js';
import { LABEL_DEPLOYMENT, LABEL_ONE_OFF, LABEL_SERVICE, MANAGED_BY } from './kubernetes-objects.ts';
import type { InstanceUsage } from './runtime-port.ts';

/**
 * What the kubernetes runtime's pods use, for the usage sampler (`/apps/{id}/usage`): memory and CPU
 * from the cluster's metrics API (`metrics.k8s.io/v1beta1` PodMetrics, served by metrics-server).
 *
 * That API answers rates (CPU cores averaged over `window`, ending at `timestamp`), while the sampler
 * takes each instance's CPU time since it started, a total that only grows: this reader integrates
 * the rates, per pod, over the time between the metrics' timestamps (the first reading counts its own
 * window, never more than the pod has lived). A process restarted inside a pod keeps the pod's name
 * and start, so it is the same instance here. `processes` is the pod's number of containers: the
 * metrics API counts no processes.
 *
 * A cluster without the metrics API (no metrics-server: 404) gives no samples, told once through
 * `warn`; any other failure is thrown for the sampler to report.
 */
export class PodUsageReader {
  /** Per pod: the CPU time integrated so far and the timestamp of the reading it ends at. */
  private readonly cpu = new Map<string, { ms: number; at: number }>();
  private warned = false;

  constructor(
    private readonly deps: {
      core: CoreV1Api;
      metrics: CustomObjectsApi;
      namespace: string;
      warn?: (message: string) => void;
    },
  ) {}

  async read(): Promise<InstanceUsage[]> {
    const { namespace } = this.deps;
    // The services' pods; a one-off (a release command) is no instance of its service.
    const labelSelector = `app.kubernetes.io/managed-by=${MANAGED_BY},${LABEL_SERVICE},!${LABEL_ONE_OFF}`;
    const [pods, metrics] = await Promise.all([this.deps.core.listNamespacedPod({ namespace, labelSelector }), this.podMetrics(labelSelector)]);
    if (!metrics) return [];
    const byName = new Map(metrics.items.map((metric) => [metric.metadata.name, metric]));
    const usage: InstanceUsage[] = [];
    const seen = new Set<string>();
    for (const pod of pods.items) {
      const name = pod.metadata?.name;
      const metric = name ? byName.get(name) : undefined;
      const labels = pod.metadata?.labels ?? {};
      const serviceId = labels[LABEL_SERVICE];
      if (!name || !metric || !serviceId || !labels[LABEL_DEPLOYMENT]) continue;
      const startedAt = startOf(pod);
      seen.add(name);
      usage.push({
        serviceId,
        deploymentId: labels[LABEL_DEPLOYMENT],
        instance: `${name}@${startedAt}`,
        startedAt,
        memoryBytes: sum(metric, 'memory'),
        cpuMs: this.integrate(name, metric, Date.parse(startedAt)),
        processes: metric.containers.length,
      });
    }
    for (const name of this.cpu.keys()) if (!seen.has(name)) this.cpu.delete(name);
    return usage;
  }

  private async podMetrics(labelSelector: string): Promise<PodMetricsList | null> {
    try {
      const answer = await this.deps.metrics.listNamespacedCustomObject({
        group: 'metrics.k8s.io',
        version: 'v1beta1',
        namespace: this.deps.namespace,
        plural: 'pods',
        labelSelector,
      });
      return answer as PodMetricsList;
    } catch (error) {
      if (!(error instanceof ApiException) || error.code !== 404) throw error;
      if (!this.warned) {
        this.warned = true;
        this.deps.warn?.('the cluster serves no metrics API (metrics.k8s.io: is metrics-server installed?): apps on it show no memory or CPU');
      }
      return null;
    }
  }

  private integrate(pod: string, metric: PodMetric, startedAt: number): number {
    const at = Date.parse(metric.timestamp);
    const cores = sum(metric, 'cpu');
    const before = this.cpu.get(pod);
    if (before && at <= before.at) return Math.round(before.ms);
    const since = before ? before.at : Math.max(startedAt, at - seconds(metric.window) * 1000);
    const ms = (before?.ms ?? 0) + cores * Math.max(0, at - since);
    this.cpu.set(pod, { ms, at });
    return Math.round(ms);
  }
}

function startOf(pod: V1Pod): string {
  const start = pod.status?.startTime ?? pod.metadata?.creationTimestamp;
  return start ? new Date(start).toISOString() : new Date(0).toISOString();
}

/** The containers' usage of one resource, in cores or bytes. */
function sum(metric: PodMetric, resource: 'cpu' | 'memory'): number {
  return metric.containers.reduce((total, container) => total + Number(quantityToScalar(container.usage[resource] ?? '0')), 0);
}

/** A metrics window as the API writes it (`30s`, `1m0s`, `15.123s`), in seconds. */
function seconds(window: string): number {
  const match = /^(?:(\d+)h)?(?:(\d+)m)?(?:([\d.]+)s)?$/.exec(window);
  if (!match) return 0;
  return Number(match[1] ?? 0) * 3600 + Number(match[2] ?? 0) * 60 + Number(match[3] ?? 0);
}
