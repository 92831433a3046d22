import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { CallOutcome } from './inference-admission.ts';

/**
 * Prometheus metrics for the gateway, on a registry of its own (several apps can share a process
 * in tests). Names follow Prometheus conventions; label values are bounded sets (endpoints,
 * configured models and providers, error kinds), never ids.
 */
export class GatewayMetrics {
  readonly registry = new Registry();
  private readonly requests = new Counter({ name: 'svc_gateway_requests_total', help: 'Gateway calls by endpoint, model and status class', labelNames: ['endpoint', 'model', 'status'], registers: [this.registry] });
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
  private readonly tokens = new Counter({ name: 'svc_gateway_tokens_total', help: 'Tokens by model and kind', labelNames: ['model', 'kind'], registers: [this.registry] });
  private readonly cost = new Counter({ name: 'svc_gateway_cost_usd_total', help: 'Metered cost in USD by model', labelNames: ['model'], registers: [this.registry] });
  private readonly upstreamErrors = new Counter({ name: 'svc_upstream_errors_total', help: 'Failed upstream attempts by provider and kind', labelNames: ['provider', 'kind'], registers: [this.registry] });
  private readonly rejections = new Counter({ name: 'svc_limiter_rejections_total', help: 'Calls refused by rate limits, concurrency, caps or credit', labelNames: ['reason'], registers: [this.registry] });

  observeCall(endpoint: string, model: string, outcome: CallOutcome): void {
    this.requests.inc({ endpoint, model, status: `${Math.floor(outcome.status / 100)}xx` });
    this.latency.observe({ endpoint, model }, outcome.latencyMs / 1000);
    if (outcome.ttftMs !== null) this.ttft.observe({ model }, outcome.ttftMs / 1000);
    if (outcome.usage) {
      this.tokens.inc({ model, kind: 'input' }, outcome.usage.inputTokens);
      this.tokens.inc({ model, kind: 'output' }, outcome.usage.outputTokens);
      if (outcome.usage.cachedInputTokens) this.tokens.inc({ model, kind: 'cached_input' }, outcome.usage.cachedInputTokens);
    }
  }

  observeCost(model: string, micros: bigint): void {
    if (micros > 0n) this.cost.inc({ model }, Number(micros) / 1e6);
  }

  upstreamError(provider: string, kind: string): void {
    this.upstreamErrors.inc({ provider, kind });
  }

  rejected(reason: string): void {
    this.rejections.inc({ reason });
  }

  /** A gauge read at scrape time (e.g. the request-log queue depth). */
  gauge(name: string, help: string, read: () => number): void {
    new Gauge({ name, help, registers: [this.registry], collect() { this.set(read()); } });
  }
}
