import { ROOT_CONTEXT } from '@opentelemetry/api';
import t from 'tap';
import { parseConfig } from '../../config/load.ts';
import type { AppConfigInput } from '../../config/schema.ts';
import { Tracing, TRACER_NAME } from '../../core/observability/tracing.ts';
import type { TapLike } from '../helpers/app.ts';
import { startFakeOtlpCollector, type FakeOtlpCollector } from '../fakes/fake-otlp-collector.ts';

/** The kernel's tracing on its own: the provider, the OTLP export, sampling and what the process log hears. */

function settings(tracing: AppConfigInput['tracing']) {
  return parseConfig({ tracing }).tracing;
}

/** A process log that keeps what it is told. */
function recordingLog() {
  const lines: Array<{ level: 'warn' | 'info'; details: Record<string, unknown>; message: string }> = [];
  return {
    lines,
    warn: (details: Record<string, unknown>, message: string) => void lines.push({ level: 'warn', details, message }),
    info: (details: Record<string, unknown>, message: string) => void lines.push({ level: 'info', details, message }),
  };
}

let collector: FakeOtlpCollector;
t.before(async () => {
  collector = await startFakeOtlpCollector();
});
t.teardown(() => collector.close());
t.beforeEach(() => {
  collector.reset();
  collector.failWith(null);
});

async function started(t: TapLike, tracing: AppConfigInput['tracing'], log = recordingLog()): Promise<Tracing> {
  const started = await Tracing.start(settings(tracing), log);
  t.teardown(() => started.shutdown());
  return started;
}

t.test('without an endpoint tracing is off: no tracer, and flushing or shutting down does nothing', async (t) => {
  const tracing = await started(t, {});
  t.equal(tracing.tracer, null);
  t.equal(tracing.enabled, false);
  await tracing.flush();
  await tracing.shutdown();
});

t.test('enabled: false keeps it off even with an endpoint', async (t) => {
  const tracing = await started(t, { enabled: false, otlpEndpoint: collector.url });
  t.equal(tracing.tracer, null);
});

t.test('spans go to the endpoint with the configured headers, service name and scope', async (t) => {
  const tracing = await started(t, { otlpEndpoint: collector.url, serviceName: 'svc-under-test', headers: { 'x-collector-key': 'k-123' } });
  tracing.tracer!.startSpan('one', undefined, ROOT_CONTEXT).end();
  await tracing.flush();
  t.equal(collector.requests.length, 1);
  t.equal(collector.requests[0]?.headers['x-collector-key'], 'k-123');
  t.equal(collector.requests[0]?.headers['content-type'], 'application/json', 'OTLP/HTTP with JSON');
  t.equal(collector.spans[0]?.name, 'one');
  t.equal(collector.spans[0]?.resource['service.name'], 'svc-under-test');
  t.equal(collector.spans[0]?.scope, TRACER_NAME);
});

t.test('a sampleRatio of 0 records no new trace', async (t) => {
  const tracing = await started(t, { otlpEndpoint: collector.url, sampleRatio: 0 });
  const span = tracing.tracer!.startSpan('unsampled', undefined, ROOT_CONTEXT);
  t.equal(span.isRecording(), false);
  span.end();
  await tracing.flush();
  t.equal(collector.spans.length, 0);
});

t.test('shutting down exports what is still in the batch', async (t) => {
  const tracing = await started(t, { otlpEndpoint: collector.url });
  tracing.tracer!.startSpan('last', undefined, ROOT_CONTEXT).end();
  await tracing.shutdown();
  t.same(
    collector.spans.map((span) => span.name),
    ['last'],
  );
});

t.test('failing exports are told to the process log once, not per export, and so is their recovery', async (t) => {
  const log = recordingLog();
  const tracing = await started(t, { otlpEndpoint: collector.url, headers: { 'x-collector-key': 'never-logged' } }, log);
  const exportOne = async (name: string) => {
    tracing.tracer!.startSpan(name, undefined, ROOT_CONTEXT).end();
    await tracing.flush();
  };
  collector.failWith(400);
  await exportOne('refused-1');
  await exportOne('refused-2');
  t.same(
    log.lines.map((line) => line.level),
    ['warn'],
    'one warning for two failed exports',
  );
  t.match(log.lines[0], { details: { collector: new URL(collector.url).origin, spans: 1 }, message: /exporting traces failed/ });
  collector.failWith(null);
  await exportOne('accepted');
  t.same(
    log.lines.map((line) => line.level),
    ['warn', 'info'],
  );
  t.notMatch(JSON.stringify(log.lines), /never-logged/, 'the headers are never logged');
});
