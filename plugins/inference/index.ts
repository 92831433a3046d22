import type { FastifyInstance } from 'fastify';
import { InferenceAdmissionPoint } from '../../core/gateway/inference-admission.ts';
import { definePlugin } from '../../core/kernel/plugin.ts';
import { Tokens } from '../../core/kernel/di-tokens.ts';
import { loadEncodingsOf } from '../../providers/input-token-bound.ts';
import { installBrowserRule } from './browser-rule.ts';
import { anthropicMessagesCapability } from './anthropic-messages/messages-capability.ts';
import type { AnyCapability } from './capability.ts';
import { chatCompletionsCapability } from './chat-capability.ts';
import { embeddingsCapability } from './embeddings-capability.ts';
import { evaluateCapability } from './evaluate-capability.ts';
import { imagesCapability } from './images-capability.ts';
import { speechCapability } from './speech-capability.ts';
import { transcriptionCapability } from './transcription-capability.ts';
import { GatewayCallPath } from './gateway-call.ts';
import { mountCapability } from './gateway-call-http.ts';
import { PathGatewayCalls } from './gateway-calls-service.ts';
import { GatewayCallsPoint } from '../../core/gateway/gateway-calls.ts';
import { InputGuardsPoint } from '../../core/gateway/input-guards.ts';
import { CallTracer } from './call-trace.ts';
import { CircuitBreaker } from './circuit-breaker.ts';
import { inferenceConfigSchema } from './inference-config.ts';
import { ModelCatalogue } from './model-catalogue.ts';
import { modelOperations } from './model-operations.ts';
import { registerModelsRoutes } from './models-routes.ts';
import { ProviderRegistry } from './provider-registry.ts';
import { responsesCapability } from './responses-capability.ts';
import { createToken } from '../../core/kernel/container.ts';
// Catalogues the codes this module answers with (core/kernel/error-catalogue.ts).
import './inference-errors.ts';

export const InferenceTokens = {
  Catalogue: createToken<ModelCatalogue>('ModelCatalogue'),
  Providers: createToken<ProviderRegistry>('ProviderRegistry'),
  CircuitBreaker: createToken<CircuitBreaker>('CircuitBreaker'),
  /** Every /v1 capability, by endpoint. */
  Capabilities: createToken<ReadonlyMap<string, AnyCapability>>('GatewayCapabilities'),
  /** The gateway call path, built on first use (its seams are read once every plugin has registered). */
  CallPath: createToken<() => GatewayCallPath>('GatewayCallPath'),
};

/** The /v1 capabilities this plugin serves on the call path; a new one is added here. */
function capabilitiesOf(catalogue: ModelCatalogue, providers: ProviderRegistry): AnyCapability[] {
  return [
    chatCompletionsCapability,
    embeddingsCapability(catalogue),
    responsesCapability(catalogue, providers),
    imagesCapability(catalogue),
    speechCapability(catalogue),
    transcriptionCapability(catalogue),
    anthropicMessagesCapability,
    evaluateCapability(catalogue, providers),
  ];
}

export const inferencePlugin = definePlugin({
  name: 'inference',
  description:
    'The OpenAI-compatible gateway at /v1: models, chat completions and responses (JSON and SSE), embeddings, images, speech, transcriptions and evaluations, with failover, on one call path',
  configSchema: inferenceConfigSchema,
  register({ container, config, extensions, logger }) {
    const catalogue = new ModelCatalogue(config);
    container.bindValue(InferenceTokens.Catalogue, catalogue);
    const providers = new ProviderRegistry();
    container.bindValue(InferenceTokens.Providers, providers);
    container.bindValue(InferenceTokens.CircuitBreaker, new CircuitBreaker(container.resolve(Tokens.Coordination), config.circuitBreaker));
    const capabilities = new Map(capabilitiesOf(catalogue, providers).map((capability) => [capability.endpoint, capability]));
    container.bindValue(InferenceTokens.Capabilities, capabilities);
    // Built on first use, by routes() or by a job's call (a worker-only process mounts no routes):
    // admission and the input guards are read once, after every plugin has provided its own.
    let path: GatewayCallPath | undefined;
    const tracer = container.resolve(Tokens.Tracing).tracer;
    const callPath = () =>
      (path ??= new GatewayCallPath({
        catalogue,
        providers: container.resolve(InferenceTokens.Providers),
        breaker: container.resolve(InferenceTokens.CircuitBreaker),
        admission: extensions.get(InferenceAdmissionPoint),
        config,
        metrics: container.resolve(Tokens.Metrics),
        guards: extensions.all(InputGuardsPoint),
        tracer: tracer && new CallTracer(tracer),
      }));
    container.bindValue(InferenceTokens.CallPath, callPath);
    extensions.provide(GatewayCallsPoint, new PathGatewayCalls(callPath, capabilities, logger));
  },
  // The management view of the catalogue: GET /client/models with prices and capability settings.
  operations: ({ container }) => modelOperations(container.resolve(InferenceTokens.Catalogue)),
  async routes(app: FastifyInstance, { container, appConfig }) {
    const catalogue = container.resolve(InferenceTokens.Catalogue);
    // Routes declaring `config.browserRule` (models list and retrieve, chat, speech) refuse pages that did not opt in.
    installBrowserRule(app);
    // Every /v1 route as mounted, this plugin's and others' (files, batches): the kernel collects them
    // (core/http/v1-surface.ts), and gives every answer of theirs the rate-limit headers too.
    const routes = app.svc.v1Routes;
    app.get('/v1', { config: { auth: { scope: 'inference' }, surface: 'v1' } }, async () => ({
      object: 'surface',
      surface: 'inference',
      endpoints: routes.map((route) => `${route.method} ${route.path}`),
    }));
    registerModelsRoutes(app, catalogue, { oneModel: appConfig.server.routeSet === 'wide' });
    const path = container.resolve(InferenceTokens.CallPath)();
    for (const capability of container.resolve(InferenceTokens.Capabilities).values()) await mountCapability(app, path, capability);
  },
  async start({ container, config, logger }) {
    await container.resolve(InferenceTokens.Providers).load(config, logger);
    // Before the first call, so it reserves what its tokenizer counts rather than the byte bound.
    await loadEncodingsOf(
      container
        .resolve(InferenceTokens.Catalogue)
        .all()
        .map((model) => model.inputProfile),
    ).catch((error: unknown) => logger.warn({ err: error }, 'loading a tokenizer failed: its models reserve input by the byte bound'));
    await container.resolve(InferenceTokens.CircuitBreaker).start();
  },
  async stop({ container }) {
    await container.resolve(InferenceTokens.CircuitBreaker).stop();
    await container.resolve(InferenceTokens.Providers).close();
  },
});
