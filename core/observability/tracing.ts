import type { Tracer } from '@opentelemetry/api';
import type { SpanExporter } from '@opentelemetry/sdk-trace-base';
import type { AppConfig } from '../../config/schema.ts';

export type TracingSettings = AppConfig['tracing'];

/** The name the gateway's spans are recorded under (the instrumentation scope). */
export const TRACER_NAME = 'svc-gateway';

interface ProviderHandle {
  forceFlush(): Promise<void>;
  shutdown(): Promise<void>;
}

interface ProblemLog {
  warn(details: Record<string, unknown>, message: string): void;
  info(details: Record<string, unknown>, message: string): void;
}

/**
 * The process's tracing (`tracing.*` in config): off, or an OpenTelemetry tracer provider that
 * samples parent-based at `sampleRatio` and exports in batches over OTLP/HTTP (JSON). Off is the
 * default, and then nothing of the SDK is even loaded (it is imported on use, as drivers are),
 * `tracer` is null and the call path checks that once per call. The provider is the app's own,
 * never registered as OpenTelemetry's global one: several apps share a process in tests, and a
 * host embedding the service keeps its own global. Spans are parented explicitly, so no context
 * manager (AsyncLocalStorage) runs on the hot path either.
 */
export class Tracing {
  static readonly off = new Tracing(null, null);

  private constructor(
    /** Null when tracing is off. */
    readonly tracer: Tracer | null,
    private readonly provider: ProviderHandle | null,
  ) {}

  get enabled(): boolean {
    return this.tracer !== null;
  }

  /** Off unless enabled with an endpoint; otherwise the provider, started. */
  static async start(settings: TracingSettings, log: ProblemLog): Promise<Tracing> {
    const endpoint = settings.otlpEndpoint;
    if (!settings.enabled || endpoint === undefined) return Tracing.off;
    const [sdk, { OTLPTraceExporter }, { defaultResource, resourceFromAttributes }, { ATTR_SERVICE_NAME }] = await Promise.all([
      import('@opentelemetry/sdk-trace-base'),
      import('@opentelemetry/exporter-trace-otlp-http'),
      import('@opentelemetry/resources'),
      import('@opentelemetry/semantic-conventions'),
    ]);
    const timeoutMillis = settings.exportTimeoutMs;
    // Explicit settings win over the OTEL_* variables the exporter would read; config/load.ts has read them already.
    const exporter = new ReportingExporter(new OTLPTraceExporter({ url: endpoint, headers: { ...settings.headers }, timeoutMillis }), new URL(endpoint).origin, log);
    const provider = new sdk.BasicTracerProvider({
      resource: defaultResource().merge(resourceFromAttributes({ [ATTR_SERVICE_NAME]: settings.serviceName })),
      sampler: new sdk.ParentBasedSampler({ root: new sdk.TraceIdRatioBasedSampler(settings.sampleRatio) }),
      spanProcessors: [new sdk.BatchSpanProcessor(exporter, { exportTimeoutMillis: timeoutMillis })],
    });
    return new Tracing(provider.getTracer(TRACER_NAME), provider);
  }

  /**
   * Exports every ended span now (tests; shutdown does it too). Resolves once the export is over,
   * whether it worked or not: a failure is the process log's (ReportingExporter), not the caller's.
   */
  async flush(): Promise<void> {
    await this.provider?.forceFlush().catch(ignore);
  }

  /**
   * On graceful stop, after the plugins (a call's settle span ends when metering drains): the last
   * export, then no more. A collector that cannot take it costs at most `exportTimeoutMs`.
   */
  async shutdown(): Promise<void> {
    await this.provider?.shutdown().catch(ignore);
  }
}

function ignore(): void {}

/**
 * The OTLP exporter, telling the process log when exports start failing and when they work again:
 * once per change, not once per batch, and never the headers (they often carry the collector's key).
 * The SDK alone would report through OpenTelemetry's diagnostic logger, which is silent by default.
 */
class ReportingExporter implements SpanExporter {
  private failing = false;

  constructor(
    private readonly exporter: SpanExporter,
    private readonly origin: string,
    private readonly log: ProblemLog,
  ) {}

  export(spans: Parameters<SpanExporter['export']>[0], done: Parameters<SpanExporter['export']>[1]): void {
    this.exporter.export(spans, (result) => {
      // ExportResultCode.SUCCESS is 0 (@opentelemetry/core, not a dependency of ours).
      const failed = result.code !== 0;
      if (failed && !this.failing) {
        this.log.warn({ collector: this.origin, spans: spans.length, reason: result.error?.message }, 'exporting traces failed; spans are dropped until the collector answers');
      } else if (!failed && this.failing) {
        this.log.info({ collector: this.origin }, 'exporting traces works again');
      }
      this.failing = failed;
      done(result);
    });
  }

  shutdown(): Promise<void> {
    return this.exporter.shutdown();
  }

  forceFlush(): Promise<void> {
    return this.exporter.forceFlush?.() ?? Promise.resolve();
  }
}
