import t from 'tap';
import { formatTraceparent, incomingTraceHeaders, parseTraceparent } from '../../core/observability/trace-context.ts';

const TRACE_ID = '4bf92f3577b34da6a3ce929d0e0e4736';
const SPAN_ID = '00f067aa0ba902b7';
const VALID = `00-${TRACE_ID}-${SPAN_ID}-01`;

t.test('a version 00 traceparent gives its trace id, parent span id and flags', async (t) => {
  t.same(parseTraceparent(VALID), { traceId: TRACE_ID, spanId: SPAN_ID, traceFlags: 1 });
});

t.test('a traceparent the specification refuses is no parent', async (t) => {
  const refused = {
    'upper-case hex': VALID.toUpperCase(),
    'version ff': `ff-${TRACE_ID}-${SPAN_ID}-01`,
    'version 00 with a fifth field': `${VALID}-extra`,
    'an all-zero trace id': `00-${'0'.repeat(32)}-${SPAN_ID}-01`,
    'an all-zero parent id': `00-${TRACE_ID}-${'0'.repeat(16)}-01`,
    'a short trace id': `00-${TRACE_ID.slice(1)}-${SPAN_ID}-01`,
    'two headers joined by a comma': `${VALID}, ${VALID}`,
    'an empty string': '',
  };
  for (const [what, value] of Object.entries(refused)) t.equal(parseTraceparent(value), null, what);
});

t.test('a later version is read by its first four fields', async (t) => {
  t.same(parseTraceparent(`01-${TRACE_ID}-${SPAN_ID}-03-what-comes-next`), { traceId: TRACE_ID, spanId: SPAN_ID, traceFlags: 3 });
});

t.test('a span context is written as a version 00 traceparent with two flag digits', async (t) => {
  t.equal(formatTraceparent({ traceId: TRACE_ID, spanId: SPAN_ID, traceFlags: 1 }), VALID);
  t.equal(formatTraceparent({ traceId: TRACE_ID, spanId: SPAN_ID, traceFlags: 0 }), `00-${TRACE_ID}-${SPAN_ID}-00`);
});

t.test('a caller’s headers are kept only beside a valid traceparent, tracestate included', async (t) => {
  t.same(incomingTraceHeaders(VALID, 'congo=t61rcWkgMzE'), { traceparent: VALID, tracestate: 'congo=t61rcWkgMzE' });
  t.same(incomingTraceHeaders(VALID, undefined), { traceparent: VALID });
  t.equal(incomingTraceHeaders('garbage', 'congo=t61rcWkgMzE'), undefined);
  t.equal(incomingTraceHeaders(undefined, 'congo=t61rcWkgMzE'), undefined);
  t.equal(incomingTraceHeaders([VALID, VALID], undefined), undefined, 'two headers as an array');
});

t.test('a tracestate longer than 512 characters is dropped, the traceparent kept', async (t) => {
  t.same(incomingTraceHeaders(VALID, `a=${'b'.repeat(511)}`), { traceparent: VALID });
  t.same(incomingTraceHeaders(VALID, `a=${'b'.repeat(510)}`), { traceparent: VALID, tracestate: `a=${'b'.repeat(510)}` });
});
