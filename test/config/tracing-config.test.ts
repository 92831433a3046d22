import t from 'tap';
import { parseConfig } from '../../config/load.ts';
import { assertConfigError } from '../helpers/config-errors.ts';

/** The `tracing` section and the OpenTelemetry SDK's environment variables that feed it. */

t.test('tracing is off by default: no endpoint, every new trace recorded once on, the service named svc-gateway', async (t) => {
  const { tracing } = parseConfig({});
  t.equal(tracing.otlpEndpoint, undefined);
  t.equal(tracing.sampleRatio, 1);
  t.equal(tracing.serviceName, 'svc-gateway');
  t.same(tracing.headers, {});
});

t.test('OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is the endpoint as it is, over the file', async (t) => {
  const { tracing } = parseConfig({ tracing: { otlpEndpoint: 'http://file:4318/v1/traces' } }, { OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://collector:4318/custom/path' });
  t.equal(tracing.otlpEndpoint, 'http://collector:4318/custom/path');
});

t.test('OTEL_EXPORTER_OTLP_ENDPOINT is a base the traces path is appended to', async (t) => {
  t.equal(parseConfig({}, { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' }).tracing.otlpEndpoint, 'http://collector:4318/v1/traces');
  t.equal(parseConfig({}, { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318/otlp/' }).tracing.otlpEndpoint, 'http://collector:4318/otlp/v1/traces');
});

t.test('the traces endpoint variable wins over the base one', async (t) => {
  const env = { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://base:4318', OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://traces:4318/v1/traces' };
  t.equal(parseConfig({}, env).tracing.otlpEndpoint, 'http://traces:4318/v1/traces');
});

t.test('OTEL_EXPORTER_OTLP_HEADERS and …_TRACES_HEADERS add percent-decoded headers to the file’s, the traces ones winning', async (t) => {
  const env = { OTEL_EXPORTER_OTLP_HEADERS: 'x-team=a%20b, x-shared=generic', OTEL_EXPORTER_OTLP_TRACES_HEADERS: 'x-shared=traces' };
  const { tracing } = parseConfig({ tracing: { headers: { 'x-file': 'kept' } } }, env);
  t.same(tracing.headers, { 'x-file': 'kept', 'x-team': 'a b', 'x-shared': 'traces' });
});

t.test('a malformed OTEL_EXPORTER_OTLP_HEADERS fails naming the variable, never its value', async (t) => {
  assertConfigError(t, () => parseConfig({}, { OTEL_EXPORTER_OTLP_HEADERS: 'secret-value-without-a-key' }), 'OTEL_EXPORTER_OTLP_HEADERS');
  try {
    parseConfig({}, { OTEL_EXPORTER_OTLP_HEADERS: 'secret-value-without-a-key' });
  } catch (error) {
    t.notMatch((error as Error).message, /secret-value/);
  }
});

t.test('OTEL_SERVICE_NAME names the service', async (t) => {
  t.equal(parseConfig({}, { OTEL_SERVICE_NAME: 'edge-gateway' }).tracing.serviceName, 'edge-gateway');
});

t.test('OTEL_SDK_DISABLED=true turns tracing off, whatever the endpoint', async (t) => {
  const { tracing } = parseConfig({ tracing: { otlpEndpoint: 'http://collector:4318/v1/traces' } }, { OTEL_SDK_DISABLED: 'true' });
  t.equal(tracing.enabled, false);
  t.equal(parseConfig({}, { OTEL_SDK_DISABLED: 'false' }).tracing.enabled, true);
});

t.test('an endpoint that is not http or https fails naming tracing.otlpEndpoint', async (t) => {
  assertConfigError(t, () => parseConfig({ tracing: { otlpEndpoint: 'grpc://collector:4317' } }), 'tracing.otlpEndpoint');
});

t.test('a sampleRatio outside 0 to 1 fails naming tracing.sampleRatio', async (t) => {
  assertConfigError(t, () => parseConfig({ tracing: { sampleRatio: 1.5 } }), 'tracing.sampleRatio');
});

t.test('an unknown field in tracing fails naming it', async (t) => {
  assertConfigError(t, () => parseConfig({ tracing: { endpoint: 'http://collector:4318' } }), 'tracing.endpoint');
});
