import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { CallOutcome } from './inference-admission.ts';

/** One endpoint and model's sums since start; status counts by class (index 1 = 1xx … 5 = 5xx). */
interface CallTally {
  endpoint: string;
  model: string;
  byStatusClass: number[];
  inputTokens: number;
  outputTokens: number;
  cachedInputTokens: number;
}

/**
 * Prometheus metrics for the gateway, on a registry of its own (several apps can share a process
 * in tests). Names follow Prometheus conventions; label values are bounded sets (endpoints,
 * configured models and providers, error kinds), never ids.
 *
 * The per-call counters (requests, tokens, cost) are plain sums kept per endpoint and model and
 * handed to prom-client when /metrics is scraped: prom-client builds and hashes a label key on
 * every increment, which the hot path would otherwise pay several times per call. Histograms
 * keep observing per call (their buckets have no setter).
 */
export class GatewayMetrics {
  readonly registry = new Registry();
  /** endpoint -> model -> sums */
  private readonly tallies = new Map<string, Map<string, CallTally>>();
  /** model -> micro-USD (integers stay exact in a double up to 2^53 µUSD, about $9 billion) */
  private readonly costMicros = new Map<string, number>();

  private readonly latency = new Histogram({
    name: 'svc_gateway_request_duration_seconds',
    help: 'Gateway call latency, upstream included',
    labelNames: ['endpoint', 'model'],
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120],
    registers: [this.registry],
  });
  private readonly ttft = new Histogram({
    name: 'svc_gateway_time_to_first_token_seconds',
    help: 'Time to the first streamed content',
    labelNames: ['model'],
    buckets: [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30],
    registers: [this.registry],
  });
  private readonly upstreamErrors = new Counter({
    name: 'svc_upstream_errors_total',
    help: 'Failed upstream attempts by provider and kind',
    labelNames: ['provider', 'kind'],
    registers: [this.registry],
  });
  private readonly rejections = new Counter({
    name: 'svc_limiter_rejections_total',
    help: 'Calls refused by rate limits, concurrency, caps or credit',
    labelNames: ['reason'],
    registers: [this.registry],
  });

  constructor() {
    const tallies = () => [...this.tallies.values()].flatMap((byModel) => [...byModel.values()]);
    const costMicros = this.costMicros;
    new Counter({
      name: 'svc_gateway_requests_total',
      help: 'Gateway calls by endpoint, model and status class',
      labelNames: ['endpoint', 'model', 'status'],
      registers: [this.registry],
      collect() {
        this.reset();
        for (const tally of tallies()) {
          tally.byStatusClass.forEach((count, statusClass) => {
            if (count > 0) this.inc({ endpoint: tally.endpoint, model: tally.model, status: `${statusClass}xx` }, count);
          });
        }
      },
    });
    new Counter({
      name: 'svc_gateway_tokens_total',
      help: 'Tokens by model and kind',
      labelNames: ['model', 'kind'],
      registers: [this.registry],
      collect() {
        this.reset();
        const byModel = new Map<string, { input: number; output: number; cached_input: number }>();
        for (const tally of tallies()) {
          const sums = byModel.get(tally.model) ?? { input: 0, output: 0, cached_input: 0 };
          sums.input += tally.inputTokens;
          sums.output += tally.outputTokens;
          sums.cached_input += tally.cachedInputTokens;
          byModel.set(tally.model, sums);
        }
        for (const [model, sums] of byModel) {
          for (const [kind, value] of Object.entries(sums)) if (value > 0) this.inc({ model, kind }, value);
        }
      },
    });
    new Counter({
      name: 'svc_gateway_cost_usd_total',
      help: 'Metered cost in USD by model',
      labelNames: ['model'],
      registers: [this.registry],
      collect() {
        this.reset();
        for (const [model, micros] of costMicros) this.inc({ model }, micros / 1e6);
      },
    });
  }

  observeCall(endpoint: string, model: string, outcome: CallOutcome): void {
    const tally = this.tallyOf(endpoint, model);
    tally.byStatusClass[Math.min(5, Math.max(1, Math.floor(outcome.status / 100)))]! += 1;
    if (outcome.usage) {
      tally.inputTokens += outcome.usage.inputTokens;
      tally.outputTokens += outcome.usage.outputTokens;
      tally.cachedInputTokens += outcome.usage.cachedInputTokens;
    }
    this.latency.observe({ endpoint, model }, outcome.latencyMs / 1000);
    if (outcome.ttftMs !== null) this.ttft.observe({ model }, outcome.ttftMs / 1000);
  }

  observeCost(model: string, micros: bigint): void {
    if (micros > 0n) this.costMicros.set(model, (this.costMicros.get(model) ?? 0) + Number(micros));
  }

  upstreamError(provider: string, kind: string): void {
    this.upstreamErrors.inc({ provider, kind });
  }

  rejected(reason: string): void {
    this.rejections.inc({ reason });
  }

  /** A gauge read at scrape time (e.g. the request-log queue depth). */
  gauge(name: string, help: string, read: () => number): void {
    new Gauge({
      name,
      help,
      registers: [this.registry],
      collect() {
        this.set(read());
      },
    });
  }

  private tallyOf(endpoint: string, model: string): CallTally {
    let byModel = this.tallies.get(endpoint);
    if (!byModel) this.tallies.set(endpoint, (byModel = new Map()));
    let tally = byModel.get(model);
    if (!tally) byModel.set(model, (tally = { endpoint, model, byStatusClass: [0, 0, 0, 0, 0, 0], inputTokens: 0, outputTokens: 0, cachedInputTokens: 0 }));
    return tally;
  }
}
