import type { Credential } from '../../core/identity/credential.ts';
import { ApiError } from '../../core/kernel/errors.ts';
import type { InputTokenProfile } from '../../providers/input-token-bound.ts';
import type { InferenceConfig, ModelConfig } from './inference-config.ts';
import { modelInputProfile } from './input-token-profile.ts';
// Catalogues the codes this module answers with (core/kernel/error-catalogue.ts).
import './inference-errors.ts';

export interface CatalogueModel extends ModelConfig {
  id: string;
  /** Seconds since the epoch, for the OpenAI model object. */
  created: number;
  /** What bounds a request's input tokens for reservations. */
  inputProfile: InputTokenProfile;
}

/** The public model ids and how each maps to upstream routes; filtered by a credential's allow-list. */
export class ModelCatalogue {
  private readonly models: Map<string, CatalogueModel>;

  constructor(config: InferenceConfig, created = Math.floor(Date.now() / 1000)) {
    this.models = new Map(Object.entries(config.models).map(([id, model]) => [id, { ...model, id, created, inputProfile: modelInputProfile(model, config.providers) }]));
  }

  /** Every model the credential may use, in config order. */
  visibleTo(credential: Credential): CatalogueModel[] {
    return [...this.models.values()].filter((model) => allows(credential, model.id));
  }

  /** The model, or 404 model_not_found when it is unknown or outside the credential's allow-list. */
  require(credential: Credential, id: unknown, param = 'model'): CatalogueModel {
    const model = typeof id === 'string' ? this.models.get(id) : undefined;
    if (!model || !allows(credential, model.id)) {
      throw new ApiError('model_not_found', `The model ${JSON.stringify(id)} does not exist or this key cannot use it; GET /v1/models lists the ones it can`, { param });
    }
    return model;
  }

  all(): CatalogueModel[] {
    return [...this.models.values()];
  }
}

function allows(credential: Credential, modelId: string): boolean {
  return credential.kind !== 'key' || credential.modelAllowList === null || credential.modelAllowList.has(modelId);
}
