import type { Registry } from 'prom-client';

/** One label set's counts: what the caller holds on to and observes into. */
export interface HistogramSeries {
  readonly labels: Readonly<Record<string, string>>;
  /** Per bucket, the observations at or below its bound and above the one before (not cumulative). */
  readonly counts: Float64Array;
  sum: number;
  count: number;
}

interface ExportedValue {
  value: number;
  labels: Record<string, string | number>;
  sharedLabels?: Record<string, string>;
  metricName: string;
  /** prom-client's buckets carry one (none here); its sums and counts do not. */
  exemplar?: null;
}

/**
 * A Prometheus histogram for the hot path: the caller keeps the series of each label set (the
 * gateway's tallies do) and observes into it, where prom-client's Histogram validates, builds and
 * hashes a label key on every observation. Registered on a prom-client registry as a metric of
 * its own, it is exposed exactly as prom-client's Histogram exposes one (the same lines, labels
 * and order; cumulative buckets, `+Inf`, `_sum`, `_count`; the same JSON for worker aggregation).
 */
export class TalliedHistogram {
  readonly type = 'histogram';
  readonly aggregator = 'sum';
  readonly name: string;
  readonly help: string;
  private readonly bounds: readonly number[];
  private series: HistogramSeries[] = [];

  constructor(options: { name: string; help: string; buckets: readonly number[]; registers: Registry[] }) {
    this.name = options.name;
    this.help = options.help;
    this.bounds = [...options.buckets].sort((a, b) => a - b);
    // The registry needs only a name, help, type and get(): it takes any such metric.
    for (const registry of options.registers) registry.registerMetric(this as unknown as Parameters<Registry['registerMetric']>[0]);
  }

  /** A new label set's series, listed in the order series were made (prom-client's: first observed first). */
  newSeries(labels: Readonly<Record<string, string>>): HistogramSeries {
    const series: HistogramSeries = { labels, counts: new Float64Array(this.bounds.length), sum: 0, count: 0 };
    this.series.push(series);
    return series;
  }

  /** One observation (seconds), as Histogram.observe would count it: in the first bucket whose bound is at or above it. */
  observe(series: HistogramSeries, value: number): void {
    if (!Number.isFinite(value)) throw new TypeError(`Value is not a valid number: ${value}`);
    const bounds = this.bounds;
    for (let i = 0; i < bounds.length; i++) {
      if (value <= bounds[i]!) {
        series.counts[i]! += 1;
        break;
      }
    }
    series.sum += value;
    series.count += 1;
  }

  /** Forgets every observation (the registry's resetMetrics); series already handed out start again from zero. */
  reset(): void {
    for (const series of this.series) {
      series.counts.fill(0);
      series.sum = 0;
      series.count = 0;
    }
  }

  /** What the registry formats as text: labels as prom-client's Histogram leaves them there (`le` first). */
  getForPromString() {
    const values: ExportedValue[] = [];
    const name = this.name;
    for (const series of this.series) {
      if (series.count === 0) continue;
      let cumulative = 0;
      for (let i = 0; i < this.bounds.length; i++) {
        cumulative += series.counts[i]!;
        values.push({ labels: { le: this.bounds[i]! }, sharedLabels: { ...series.labels }, value: cumulative, metricName: `${name}_bucket`, exemplar: null });
      }
      values.push({ labels: { le: '+Inf' }, sharedLabels: { ...series.labels }, value: series.count, metricName: `${name}_bucket`, exemplar: null });
      values.push({ labels: {}, sharedLabels: { ...series.labels }, value: series.sum, metricName: `${name}_sum` });
      values.push({ labels: {}, sharedLabels: { ...series.labels }, value: series.count, metricName: `${name}_count` });
    }
    return { name, help: this.help, type: this.type, values, aggregator: this.aggregator };
  }

  /** As JSON (getMetricsAsJSON, worker aggregation): the series' labels merged into each value's, as prom-client's get() does. */
  get() {
    const data = this.getForPromString();
    return {
      ...data,
      values: data.values.map(({ sharedLabels, labels, ...value }) => ({ ...value, labels: { ...labels, ...sharedLabels } })),
    };
  }
}
