import type { FastifyInstance } from 'fastify';
import { InferenceAdmissionPoint, openAdmission } from '../../core/gateway/inference-admission.ts';
import { definePlugin } from '../../core/kernel/plugin.ts';
import { Tokens } from '../../core/kernel/di-tokens.ts';
import { loadEncodingsOf } from '../../providers/input-token-bound.ts';
import { installBrowserRule } from './browser-rule.ts';
import { registerChatCompletionsRoute } from './chat-completions-route.ts';
import { CircuitBreaker } from './circuit-breaker.ts';
import { inferenceConfigSchema } from './inference-config.ts';
import { ModelCatalogue } from './model-catalogue.ts';
import { modelOperations } from './model-operations.ts';
import { registerModelsRoutes } from './models-routes.ts';
import { ProviderRegistry } from './provider-registry.ts';
import { createToken } from '../../core/kernel/container.ts';
// Catalogues the codes this module answers with (core/kernel/error-catalogue.ts).
import './inference-errors.ts';

export const InferenceTokens = {
  Catalogue: createToken<ModelCatalogue>('ModelCatalogue'),
  Providers: createToken<ProviderRegistry>('ProviderRegistry'),
  CircuitBreaker: createToken<CircuitBreaker>('CircuitBreaker'),
};

export const inferencePlugin = definePlugin({
  name: 'inference',
  description: 'The OpenAI-compatible gateway at /v1: models, chat completions (JSON and SSE) with failover',
  configSchema: inferenceConfigSchema,
  register({ container, config }) {
    container.bindValue(InferenceTokens.Catalogue, new ModelCatalogue(config));
    container.bindValue(InferenceTokens.Providers, new ProviderRegistry());
    container.bindValue(InferenceTokens.CircuitBreaker, new CircuitBreaker(container.resolve(Tokens.Coordination), config.circuitBreaker));
  },
  // The management view of the catalogue: GET /client/models with prices and capability settings.
  operations: ({ container }) => modelOperations(container.resolve(InferenceTokens.Catalogue)),
  routes(app: FastifyInstance, { container, extensions, config }) {
    const catalogue = container.resolve(InferenceTokens.Catalogue);
    // Routes declaring `config.browserRule` (models list and retrieve, chat, speech) refuse pages that did not opt in.
    installBrowserRule(app);
    app.get('/v1', { config: { auth: { scope: 'inference' }, surface: 'v1' } }, async () => ({
      object: 'surface',
      surface: 'inference',
      endpoints: ['GET /v1/models', 'GET /v1/models/{model}', 'POST /v1/chat/completions'],
    }));
    // The kernel's extension point: openAdmission unless a metering plugin provides its own, which
    // it has by now (every plugin registers before any routes()).
    const admission = extensions.get(InferenceAdmissionPoint);
    // Responses that took nothing from the limits (model lists, refusals before admission) still
    // say where the caller stands. Without a metering plugin there are no limits to tell of.
    if (admission !== openAdmission)
      app.addHook('onSend', (request, reply, payload, done) => {
        if (!request.credential || reply.hasHeader('x-ratelimit-limit-requests') || reply.hasHeader('x-ratelimit-limit-tokens')) return done(null, payload);
        admission.peekHeaders(request.credential).then(
          (headers) => {
            void reply.headers(headers);
            done(null, payload);
          },
          // Headers are advice; a coordination hiccup must not fail the response.
          () => done(null, payload),
        );
      });
    registerModelsRoutes(app, catalogue);
    registerChatCompletionsRoute(app, {
      catalogue,
      providers: container.resolve(InferenceTokens.Providers),
      breaker: container.resolve(InferenceTokens.CircuitBreaker),
      admission,
      config,
      metrics: container.resolve(Tokens.Metrics),
    });
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
