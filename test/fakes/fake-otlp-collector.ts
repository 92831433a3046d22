import http, { type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * A local OTLP/HTTP receiver, as a collector would listen on :4318: a real HTTP server that takes
 * `POST /v1/traces` with an OTLP/JSON body, answers 200 `{}`, and keeps every span it got,
 * flattened with its resource and scope. Anything else is answered 404.
 *
 *   const collector = await startFakeOtlpCollector();
 *   // tracing: { otlpEndpoint: collector.url } ; … ; await tracing.flush()
 *   collector.spans.filter((span) => span.traceId === mine)
 */

/** SpanKind as OTLP numbers it. */
export const OTLP_KIND = { internal: 1, server: 2, client: 3 } as const;
/** Status codes as OTLP numbers them. */
export const OTLP_STATUS = { unset: 0, ok: 1, error: 2 } as const;

export interface ExportedSpan {
  traceId: string;
  spanId: string;
  /** Empty or absent for a root span. */
  parentSpanId?: string;
  name: string;
  kind: number;
  startTimeUnixNano: string;
  endTimeUnixNano: string;
  attributes: Record<string, unknown>;
  status: { code?: number; message?: string };
  resource: Record<string, unknown>;
  scope: string;
}

export interface ExportRequest {
  headers: IncomingHttpHeaders;
  path: string;
}

export interface FakeOtlpCollector {
  /** `http://127.0.0.1:port/v1/traces`: what `tracing.otlpEndpoint` takes. */
  url: string;
  /** Every span received, in arrival order. */
  spans: ExportedSpan[];
  /** Every POST received (exports), whatever its body. */
  requests: ExportRequest[];
  /** Answer every export with this status (keeping nothing) until set back to null. */
  failWith(status: number | null): void;
  reset(): void;
  close(): Promise<void>;
}

type OtlpValue = {
  stringValue?: string;
  intValue?: string | number;
  doubleValue?: number;
  boolValue?: boolean;
  arrayValue?: { values?: OtlpValue[] };
};
type OtlpAttribute = { key: string; value: OtlpValue };

function attributeValue(value: OtlpValue): unknown {
  if (value.stringValue !== undefined) return value.stringValue;
  if (value.intValue !== undefined) return Number(value.intValue);
  if (value.doubleValue !== undefined) return value.doubleValue;
  if (value.boolValue !== undefined) return value.boolValue;
  if (value.arrayValue !== undefined) return (value.arrayValue.values ?? []).map(attributeValue);
  return undefined;
}

function attributesOf(list: OtlpAttribute[] | undefined): Record<string, unknown> {
  return Object.fromEntries((list ?? []).map((attribute) => [attribute.key, attributeValue(attribute.value)]));
}

function spansOf(body: any): ExportedSpan[] {
  const spans: ExportedSpan[] = [];
  for (const resourceSpans of body?.resourceSpans ?? []) {
    const resource = attributesOf(resourceSpans.resource?.attributes);
    for (const scopeSpans of resourceSpans.scopeSpans ?? []) {
      for (const span of scopeSpans.spans ?? []) {
        spans.push({ ...span, attributes: attributesOf(span.attributes), status: span.status ?? {}, resource, scope: scopeSpans.scope?.name ?? '' });
      }
    }
  }
  return spans;
}

export async function startFakeOtlpCollector(): Promise<FakeOtlpCollector> {
  const spans: ExportedSpan[] = [];
  const requests: ExportRequest[] = [];
  let failure: number | null = null;
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      if (req.method !== 'POST' || req.url !== '/v1/traces') {
        res.writeHead(404).end();
        return;
      }
      requests.push({ headers: req.headers, path: req.url });
      if (failure !== null) {
        res.writeHead(failure, { 'content-type': 'application/json' }).end('{"code":3,"message":"refused by the test"}');
        return;
      }
      spans.push(...spansOf(JSON.parse(Buffer.concat(chunks).toString('utf8'))));
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  server.unref();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/v1/traces`,
    spans,
    requests,
    failWith: (status) => {
      failure = status;
    },
    reset: () => {
      spans.length = 0;
      requests.length = 0;
    },
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
