import type { Credential } from '../../core/identity/credential.ts';
import { ApiError } from '../../core/kernel/errors.ts';
import type { CatalogueModel, ModelCatalogue } from './model-catalogue.ts';
// Catalogues the codes this module answers with (core/kernel/error-catalogue.ts).
import './inference-errors.ts';

/**
 * 400 `unsupported_model` (`param: model`) for a model that does not serve an endpoint, naming the
 * models this credential may use that do: the refusal says what to send instead.
 */
export function unsupportedModel(
  model: CatalogueModel,
  { catalogue, credential, serves, does }: { catalogue: ModelCatalogue; credential: Credential; serves: (model: CatalogueModel) => boolean; does: string },
): ApiError {
  const able = catalogue
    .visibleTo(credential)
    .filter(serves)
    .map((m) => m.id);
  const which = able.length > 0 ? `models that can: ${able.join(', ')}` : 'none of the models this key can use can';
  return new ApiError('unsupported_model', `The model ${JSON.stringify(model.id)} does not ${does}; ${which}`, { param: 'model' });
}
