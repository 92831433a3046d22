import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client';
import type { CallOutcome } from './inference-admission.ts';
import { type HistogramSeries, TalliedHistogram } from './tallied-histogram.ts';

/** The label of a response no upstream call served (a refusal), and of a refusal's model. */
export const NO_LABEL = 'none';

/** One endpoint, model and provider's sums since start. */
interface CallTally {
  endpoint: string;
  model: string;
  provider: string;
  /** HTTP status -> responses */
  byStatus: Map<number, number>;
  inputTokens: number;
  outputTokens: number;
  cachedInputTokens: number;
  /** Its latency series, and its model and provider's time-to-first-token series: made when first observed. */
  latency: HistogramSeries | null;
  ttft: HistogramSeries | null;
}

/**
 * A response a gateway call was served on. A call observed with it is counted by `observeCall`, and
 * the response hook (core/http/v1-response-metrics.ts) leaves it alone: every /v1 response is
 * counted exactly once, by one counter.
 */
export interface CountedResponse {
  gatewayCallCounted: boolean;
}

/**
 * Prometheus metrics for the gateway, on a registry of its own (several apps can share a process
 * in tests). Names follow Prometheus conventions; label values are bounded sets (endpoints as
 * routed, configured models and providers, HTTP statuses, error kinds), never ids.
 *
 * `svc_gateway_requests_total` counts every /v1 response by status: calls that reached admission
 * through `observeCall` (with their model and the provider that served them, `none` when no
 * upstream ran), and every other response (refusals before and at admission, model lists) through
 * `observeResponse` with model and provider `none`.
 *
 * The per-call counters (requests, tokens, cost) are plain sums kept per endpoint, model and
 * provider and handed to prom-client when /metrics is scraped: prom-client builds and hashes a
 * label key on every increment, which the hot path would otherwise pay several times per call.
 * The call histograms are observed into the tally's own series (TalliedHistogram) for the same reason.
 */
export class GatewayMetrics {
  readonly registry = new Registry();
  /** endpoint -> model -> provider -> sums */
  private readonly tallies = new Map<string, Map<string, Map<string, CallTally>>>();
  /** model -> micro-USD (integers stay exact in a double up to 2^53 µUSD, about $9 billion) */
  private readonly costMicros = new Map<string, number>();

  private readonly latency = new TalliedHistogram({
    name: 'svc_gateway_request_duration_seconds',
    help: 'Gateway call latency, upstream included, by the provider that served it (none: no upstream ran)',
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120],
    registers: [this.registry],
  });
  private readonly ttft = new TalliedHistogram({
    name: 'svc_gateway_time_to_first_token_seconds',
    help: 'Time to the first streamed content',
    buckets: [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30],
    registers: [this.registry],
  });
  /** model -> provider -> time-to-first-token series (shared by the model's endpoints, as its labels are). */
  private readonly ttftSeries = new Map<string, Map<string, HistogramSeries>>();
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

  private readonly batchLines = new Counter({
    name: 'svc_gateway_batch_lines_total',
    help: 'Gateway calls run against a spend hold (batch lines) by endpoint, model and HTTP status; svc_gateway_requests_total counts them too',
    labelNames: ['endpoint', 'model', 'status'],
    registers: [this.registry],
  });

  private readonly toolCalls = new Counter({
    name: 'svc_mcp_tool_calls_total',
    help: 'MCP tool calls at /mcp by tool and outcome (ok, refused: a 4xx answer, failed: a 5xx answer)',
    labelNames: ['tool', 'outcome'],
    registers: [this.registry],
  });

  private readonly gatewayToolCalls = new Counter({
    name: 'svc_tool_gateway_calls_total',
    help: "Agents' calls of customers' tools at /mcp/gateway by status (ok, tool_error, upstream_error, rate_limited, approval_pending, denied, expired, cancelled)",
    labelNames: ['status'],
    registers: [this.registry],
  });
  private readonly gatewayToolCallDuration = new Histogram({
    name: 'svc_tool_gateway_call_duration_seconds',
    help: 'Duration of tool calls at /mcp/gateway, approval wait and upstream included, by status',
    labelNames: ['status'],
    buckets: [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120],
    registers: [this.registry],
  });

  constructor() {
    // Node's process metrics (CPU, memory, heap, event-loop lag, GC, handles) beside the gateway's.
    collectDefaultMetrics({ register: this.registry });
    const tallies = () => [...this.tallies.values()].flatMap((byModel) => [...byModel.values()].flatMap((byProvider) => [...byProvider.values()]));
    const costMicros = this.costMicros;
    new Counter({
      name: 'svc_gateway_requests_total',
      help: 'Every /v1 response by endpoint, model, provider (none: no upstream ran) and HTTP status',
      labelNames: ['endpoint', 'model', 'provider', 'status'],
      registers: [this.registry],
      collect() {
        this.reset();
        for (const tally of tallies()) {
          for (const [status, count] of tally.byStatus) {
            this.inc({ endpoint: tally.endpoint, model: tally.model, provider: tally.provider, status: String(status) }, count);
          }
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

  /**
   * One gateway call's outcome. Over HTTP, pass the request it was served on (`response`): its
   * status is counted here, with the call's model and provider, and not again when the response ends.
   */
  observeCall(endpoint: string, model: string, outcome: CallOutcome, response?: CountedResponse): void {
    const tally = this.tallyOf(endpoint, model, outcome.provider ?? NO_LABEL);
    tally.byStatus.set(outcome.status, (tally.byStatus.get(outcome.status) ?? 0) + 1);
    if (response) response.gatewayCallCounted = true;
    if (outcome.usage) {
      tally.inputTokens += outcome.usage.inputTokens;
      tally.outputTokens += outcome.usage.outputTokens;
      tally.cachedInputTokens += outcome.usage.cachedInputTokens;
    }
    tally.latency ??= this.latency.newSeries({ endpoint, model, provider: tally.provider });
    this.latency.observe(tally.latency, outcome.latencyMs / 1000);
    if (outcome.ttftMs !== null) {
      tally.ttft ??= this.ttftSeriesOf(model, tally.provider);
      this.ttft.observe(tally.ttft, outcome.ttftMs / 1000);
    }
  }

  /** A call observed with observeCall that was a batch line (it ran against a spend hold): marked apart. */
  observeBatchLine(endpoint: string, model: string, status: number): void {
    this.batchLines.inc({ endpoint, model, status: String(status) });
  }

  /** A /v1 response no observed call accounts for: a refusal before or at admission, a model list. */
  observeResponse(endpoint: string, status: number): void {
    const tally = this.tallyOf(endpoint, NO_LABEL, NO_LABEL);
    tally.byStatus.set(status, (tally.byStatus.get(status) ?? 0) + 1);
  }

  observeCost(model: string, micros: bigint): void {
    if (micros > 0n) this.costMicros.set(model, (this.costMicros.get(model) ?? 0) + Number(micros));
  }

  /** One MCP tool call; tool names are the registry's operations, a bounded set (unknown names count as `unknown`). */
  observeToolCall(tool: string, outcome: 'ok' | 'refused' | 'failed'): void {
    this.toolCalls.inc({ tool, outcome });
  }

  /** One tool call at /mcp/gateway; `status` is one of a fixed few (the call row's status). */
  observeGatewayToolCall(status: string, durationMs: number): void {
    this.gatewayToolCalls.inc({ status });
    this.gatewayToolCallDuration.observe({ status }, durationMs / 1000);
  }

  upstreamError(provider: string, kind: string): void {
    this.upstreamErrors.inc({ provider, kind });
  }

  rejected(reason: string): void {
    this.rejections.inc({ reason });
  }

  /** A gauge read at scrape time: a level that goes up and down (e.g. the request-log queue depth). */
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

  /**
   * A running total kept elsewhere (e.g. the request-log writer's failed flushes), read at scrape
   * time and exposed as a counter, so rate() and increase() work on it. The name ends in `_total`.
   */
  counter(name: `${string}_total`, help: string, read: () => number): void {
    new Counter({
      name,
      help,
      registers: [this.registry],
      collect() {
        this.reset();
        this.inc(read());
      },
    });
  }

  private ttftSeriesOf(model: string, provider: string): HistogramSeries {
    let byProvider = this.ttftSeries.get(model);
    if (!byProvider) this.ttftSeries.set(model, (byProvider = new Map()));
    let series = byProvider.get(provider);
    if (!series) byProvider.set(provider, (series = this.ttft.newSeries({ model, provider })));
    return series;
  }

  private tallyOf(endpoint: string, model: string, provider: string): CallTally {
    let byModel = this.tallies.get(endpoint);
    if (!byModel) this.tallies.set(endpoint, (byModel = new Map()));
    let byProvider = byModel.get(model);
    if (!byProvider) byModel.set(model, (byProvider = new Map()));
    let tally = byProvider.get(provider);
    if (!tally) {
      tally = { endpoint, model, provider, byStatus: new Map(), inputTokens: 0, outputTokens: 0, cachedInputTokens: 0, latency: null, ttft: null };
      byProvider.set(provider, tally);
    }
    return tally;
  }
}
