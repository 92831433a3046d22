import type { FastifyInstance } from 'fastify';
import type { CatalogueModel, ModelCatalogue } from './model-catalogue.ts';

export function toModelObject(model: CatalogueModel) {
  return {
    id: model.id,
    object: 'model' as const,
    created: model.created,
    owned_by: model.ownedBy,
    svc_modalities: model.modalities,
    svc_batch: model.batch,
    context_window: model.contextWindow,
    max_output_tokens: model.maxOutputTokens,
    ...(model.development ? { svc_development: true as const } : {}),
  };
}

/** `oneModel`: whether `GET /v1/models/{model}` is served (not on a host with the narrower route set). */
export function registerModelsRoutes(app: FastifyInstance, catalogue: ModelCatalogue, { oneModel }: { oneModel: boolean }): void {
  const config = { auth: { scope: 'inference' as const }, surface: 'v1' as const, browserRule: true as const };
  app.get('/v1/models', { config }, async (request) => ({
    object: 'list',
    data: catalogue.visibleTo(request.credential!).map(toModelObject),
  }));
  if (!oneModel) return;
  app.get<{ Params: { model: string } }>('/v1/models/:model', { config }, async (request) => toModelObject(catalogue.require(request.credential!, request.params.model)));
}
