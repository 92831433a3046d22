import { randomBytes } from 'node:crypto';
import t from 'tap';
import { Tokens } from '../../../core/kernel/di-tokens.ts';
import { parseTraceparent } from '../../../core/observability/trace-context.ts';
import { MeteringTokens } from '../../../plugins/metering/index.ts';
import { startFakeOtlpCollector, OTLP_KIND, OTLP_STATUS, type ExportedSpan, type FakeOtlpCollector } from '../../fakes/fake-otlp-collector.ts';
import { startGateway, type Gateway } from '../../helpers/gateway.ts';

/**
 * Traces of gateway calls, exported to a local OTLP receiver: a call continues the caller's trace
 * (W3C traceparent), each upstream attempt is a span whose context the upstream receives, and with
 * tracing off nothing is exported while the caller's own trace headers still reach the upstream.
 */

const user = [{ role: 'user' as const, content: 'hello' }];
/** A single attempt per route: a failover is then exactly two attempts. */
const ONE_ATTEMPT_PER_ROUTE = { failover: { retriesPerRoute: 0, initialBackoffMs: 5, maxBackoffMs: 20, deadlineMs: 5_000, ttftTimeoutMs: 500 } };

/** A caller's trace: a fresh trace id and parent span id per test, so each finds only its own spans. */
function callerTrace(flags = '01') {
  const traceId = randomBytes(16).toString('hex');
  const spanId = randomBytes(8).toString('hex');
  return { traceId, spanId, headers: { traceparent: `00-${traceId}-${spanId}-${flags}`, tracestate: 'vendor=opaque,other=1' } };
}

/** Every span of a finished call is exported: its settlement ends (metering idle), then the batch is flushed. */
async function exported(gw: Gateway): Promise<void> {
  const container = gw.test.app.svc.container;
  await container.resolve(MeteringTokens.Admission).idle();
  await container.resolve(Tokens.Tracing).flush();
}

const ofTrace = (collector: FakeOtlpCollector, traceId: string) => collector.spans.filter((span) => span.traceId === traceId);
const serverSpan = (spans: ExportedSpan[]) => spans.find((span) => span.kind === OTLP_KIND.server)!;
const childrenOf = (spans: ExportedSpan[], parent: ExportedSpan, name?: string) => spans.filter((span) => span.parentSpanId === parent.spanId && (name === undefined || span.name === name));
const attemptsOf = (spans: ExportedSpan[]) => spans.filter((span) => span.kind === OTLP_KIND.client).sort((a, b) => Number(BigInt(a.startTimeUnixNano) - BigInt(b.startTimeUnixNano)));

t.test('tracing on', async (t) => {
  const collector = await startFakeOtlpCollector();
  t.teardown(() => collector.close());
  const gw = await startGateway(t, { inference: ONE_ATTEMPT_PER_ROUTE, config: { tracing: { otlpEndpoint: collector.url, serviceName: 'gateway-under-test' } } });
  t.beforeEach(() => {
    gw.primary.reset();
    gw.secondary.reset();
    collector.reset();
  });

  t.test('a call with a failover is one trace under the caller’s trace id: the call, admission, both attempts and settle', async (t) => {
    const caller = callerTrace();
    gw.primary.enqueue({ kind: 'status', status: 500 });
    const { response } = await gw.client.chat.completions.create({ model: 'duo', messages: user }, { headers: caller.headers }).withResponse();
    t.equal(response.headers.get('x-svc-attempts'), '2');
    await exported(gw);

    t.ok(collector.spans.length > 0, 'spans were exported');
    t.same(
      collector.spans.filter((span) => span.traceId !== caller.traceId),
      [],
      'every span is in the caller’s trace',
    );
    const spans = ofTrace(collector, caller.traceId);
    const call = serverSpan(spans);
    t.equal(call.name, 'chat duo', 'named {operation} {model}');
    t.equal(call.parentSpanId, caller.spanId, 'a child of the caller’s span');
    t.equal(childrenOf(spans, call, 'admission').length, 1, 'admission');
    t.equal(childrenOf(spans, call, 'settle').length, 1, 'settle');
    const attempts = attemptsOf(spans);
    t.equal(attempts.length, 2, 'two attempt spans');
    t.same(
      attempts.map((span) => span.parentSpanId),
      [call.spanId, call.spanId],
      'siblings under the call',
    );
    t.same(
      attempts.map((span) => span.attributes['gen_ai.provider.name']),
      ['primary', 'secondary'],
    );
    t.same(
      attempts.map((span) => span.name),
      ['chat up-primary', 'chat up-secondary'],
    );
    t.equal(spans.length, 5, 'nothing else');
  });

  t.test('the failed attempt records the upstream’s status and error kind; the one that answered none', async (t) => {
    const caller = callerTrace();
    gw.primary.enqueue({ kind: 'status', status: 500 });
    await gw.client.chat.completions.create({ model: 'duo', messages: user }, { headers: caller.headers });
    await exported(gw);
    const [failed, answered] = attemptsOf(ofTrace(collector, caller.traceId));
    t.equal(failed?.attributes['http.response.status_code'], 500);
    t.equal(failed?.attributes['error.type'], 'server');
    t.equal(failed?.status.code, OTLP_STATUS.error);
    t.equal(answered?.attributes['error.type'], undefined);
    t.not(answered?.status.code, OTLP_STATUS.error);
  });

  t.test('each upstream receives a traceparent with the caller’s trace id and its own attempt’s span id, and the tracestate', async (t) => {
    const caller = callerTrace();
    gw.primary.enqueue({ kind: 'status', status: 500 });
    await gw.client.chat.completions.create({ model: 'duo', messages: user }, { headers: caller.headers });
    await exported(gw);
    const [first, second] = attemptsOf(ofTrace(collector, caller.traceId));
    const sentToPrimary = parseTraceparent(String(gw.primary.requests[0]?.headers['traceparent']));
    const sentToSecondary = parseTraceparent(String(gw.secondary.requests[0]?.headers['traceparent']));
    t.same(sentToPrimary, { traceId: caller.traceId, spanId: first?.spanId, traceFlags: 1 });
    t.same(sentToSecondary, { traceId: caller.traceId, spanId: second?.spanId, traceFlags: 1 });
    t.equal(gw.secondary.requests[0]?.headers['tracestate'], caller.headers.tracestate);
  });

  t.test('the call’s span carries the GenAI attributes: operation, models, provider and token usage', async (t) => {
    const caller = callerTrace();
    gw.secondary.enqueue({ kind: 'reply', usage: { prompt_tokens: 21, completion_tokens: 8 } });
    gw.primary.enqueue({ kind: 'status', status: 503 });
    await gw.client.chat.completions.create({ model: 'duo', messages: user }, { headers: caller.headers });
    await exported(gw);
    const call = serverSpan(ofTrace(collector, caller.traceId));
    t.match(call.attributes, {
      'gen_ai.operation.name': 'chat',
      'gen_ai.request.model': 'duo',
      'gen_ai.response.model': 'up-secondary',
      'gen_ai.provider.name': 'secondary',
      'gen_ai.usage.input_tokens': 21,
      'gen_ai.usage.output_tokens': 8,
      'http.response.status_code': 200,
      'svc.attempts': 2,
    });
    t.equal(call.attributes['error.type'], undefined);
    t.match(call.attributes['svc.request_id'], /^req_/);
    t.equal(call.resource['service.name'], 'gateway-under-test');
  });

  t.test('a streaming call records the time to its first chunk on the call and on the attempt that produced it', async (t) => {
    const caller = callerTrace();
    const stream = await gw.client.chat.completions.create({ model: 'solo', messages: user, stream: true }, { headers: caller.headers });
    for await (const _ of stream);
    await exported(gw);
    const spans = ofTrace(collector, caller.traceId);
    const call = serverSpan(spans);
    const [attempt] = attemptsOf(spans);
    t.equal(call.attributes['gen_ai.request.stream'], true);
    t.type(call.attributes['gen_ai.response.time_to_first_chunk'], 'number');
    t.ok((call.attributes['gen_ai.response.time_to_first_chunk'] as number) > 0);
    t.type(attempt?.attributes['gen_ai.response.time_to_first_chunk'], 'number');
    t.ok(BigInt(attempt!.endTimeUnixNano) <= BigInt(call.endTimeUnixNano), 'the attempt ends with the stream, within the call');
  });

  t.test('a call without a traceparent starts a trace of its own and sends its context upstream', async (t) => {
    await gw.client.chat.completions.create({ model: 'solo', messages: user });
    await exported(gw);
    const call = serverSpan(collector.spans);
    t.notOk(call.parentSpanId, 'a root span');
    const sent = parseTraceparent(String(gw.primary.requests[0]?.headers['traceparent']));
    t.equal(sent?.traceId, call.traceId);
    t.equal(sent?.spanId, attemptsOf(collector.spans)[0]?.spanId);
    t.notOk('tracestate' in (gw.primary.requests[0]?.headers ?? {}), 'no tracestate was invented');
  });

  t.test('a malformed traceparent is ignored: the call starts a trace of its own', async (t) => {
    const caller = callerTrace();
    const malformed = caller.headers.traceparent.toUpperCase();
    await gw.client.chat.completions.create({ model: 'solo', messages: user }, { headers: { traceparent: malformed } });
    await exported(gw);
    const call = serverSpan(collector.spans);
    t.not(call.traceId, caller.traceId);
    t.notOk(call.parentSpanId);
  });

  t.test('a caller that did not sample its trace is followed: nothing is exported, and the upstream sees the flag', async (t) => {
    const caller = callerTrace('00');
    await gw.client.chat.completions.create({ model: 'solo', messages: user }, { headers: caller.headers });
    await exported(gw);
    t.equal(collector.spans.length, 0);
    const sent = parseTraceparent(String(gw.primary.requests[0]?.headers['traceparent']));
    t.equal(sent?.traceId, caller.traceId, 'the trace continues upstream');
    t.equal(sent?.traceFlags, 0, 'unsampled');
  });

  t.test('a call refused before admission is traced with the code its client received, and no admission span', async (t) => {
    const caller = callerTrace();
    const error = await gw.client.chat.completions.create({ model: 'no-such-model', messages: user }, { headers: caller.headers }).catch((e: unknown) => e);
    t.equal((error as { status?: number }).status, 404);
    await exported(gw);
    const spans = ofTrace(collector, caller.traceId);
    t.equal(spans.length, 1, 'only the call');
    t.equal(spans[0]?.attributes['error.type'], 'model_not_found');
    t.equal(spans[0]?.attributes['http.response.status_code'], 404);
    t.not(spans[0]?.status.code, OTLP_STATUS.error, 'a refusal is not a server error');
  });

  t.test('a call whose every route fails ends its span as an error with upstream_error', async (t) => {
    const caller = callerTrace();
    gw.primary.enqueue({ kind: 'status', status: 500 });
    gw.secondary.enqueue({ kind: 'status', status: 502 });
    const error = await gw.client.chat.completions.create({ model: 'duo', messages: user }, { headers: caller.headers }).catch((e: unknown) => e);
    t.equal((error as { status?: number }).status, 502);
    await exported(gw);
    const spans = ofTrace(collector, caller.traceId);
    const call = serverSpan(spans);
    t.equal(call.attributes['error.type'], 'upstream_error');
    t.equal(call.status.code, OTLP_STATUS.error);
    t.equal(attemptsOf(spans).length, 2);
    t.equal(childrenOf(spans, call, 'settle').length, 1, 'a failed call is settled too');
  });
});

t.test('closing the app exports the spans still waiting in the batch', async (t) => {
  const collector = await startFakeOtlpCollector();
  t.teardown(() => collector.close());
  const gw = await startGateway(t, { config: { tracing: { otlpEndpoint: collector.url } } });
  const caller = callerTrace();
  await gw.client.chat.completions.create({ model: 'solo', messages: user }, { headers: caller.headers });
  t.equal(collector.requests.length, 0, 'nothing exported yet (the batch waits)');
  await gw.test.app.close();
  t.equal(ofTrace(collector, caller.traceId).length, 4, 'the call, admission, its attempt and settle');
});

t.test('tracing off', async (t) => {
  const collector = await startFakeOtlpCollector();
  t.teardown(() => collector.close());
  // The endpoint is there, so only `enabled: false` keeps the spans away.
  const gw = await startGateway(t, { config: { tracing: { enabled: false, otlpEndpoint: collector.url } } });
  t.beforeEach(() => gw.primary.reset());

  t.test('no tracer is made', async (t) => {
    t.equal(gw.test.app.svc.container.resolve(Tokens.Tracing).tracer, null);
  });

  t.test('an upstream sees no trace headers the caller did not send', async (t) => {
    await gw.client.chat.completions.create({ model: 'solo', messages: user });
    t.notOk('traceparent' in (gw.primary.requests[0]?.headers ?? {}));
    t.notOk('tracestate' in (gw.primary.requests[0]?.headers ?? {}));
  });

  t.test('the caller’s traceparent and tracestate reach the upstream as they were sent', async (t) => {
    const caller = callerTrace();
    await gw.client.chat.completions.create({ model: 'solo', messages: user }, { headers: caller.headers });
    t.equal(gw.primary.requests[0]?.headers['traceparent'], caller.headers.traceparent);
    t.equal(gw.primary.requests[0]?.headers['tracestate'], caller.headers.tracestate);
  });

  t.test('a caller’s malformed traceparent is not passed on', async (t) => {
    await gw.client.chat.completions.create({ model: 'solo', messages: user }, { headers: { traceparent: 'not-a-traceparent', tracestate: 'a=b' } });
    t.notOk('traceparent' in (gw.primary.requests[0]?.headers ?? {}));
    t.notOk('tracestate' in (gw.primary.requests[0]?.headers ?? {}));
  });

  t.test('nothing is exported, even when the app closes', async (t) => {
    await gw.client.chat.completions.create({ model: 'solo', messages: user });
    await gw.test.app.close();
    t.equal(collector.requests.length, 0);
  });
});
