import type { ModelConfig } from '../inference/inference-config.ts';
import { picoPerImageOf, type PriceSheet } from './pricing.ts';

/**
 * What a model's capabilities let a call use that its prices do not cover, as config paths and
 * messages: the metering plugin refuses to start with any (a call must never be served free, and
 * a 400 for a size the model lists would be a config error shown to the caller). Every size ×
 * quality of an image model, speech's characters, transcription's seconds and the web-search tool.
 */
export function uncoveredPrices(model: Pick<ModelConfig, 'images' | 'speech' | 'transcription' | 'builtinTools'>, sheet: PriceSheet): string[] {
  const gaps: string[] = [];
  for (const size of model.images?.sizes ?? []) {
    for (const quality of model.images?.qualities ?? []) {
      if (picoPerImageOf(sheet, size, quality) === null) gaps.push(`images.${size}.${quality}: images of size ${size} and quality ${quality} need a price (or perImageUsd)`);
    }
  }
  if (model.speech && sheet.picoPerCharacter === null) gaps.push('perCharacterUsd: required for a speech model');
  if (model.transcription && sheet.picoPerAudioSecond === null) gaps.push('perAudioSecondUsd: required for a transcription model');
  if (model.builtinTools.webSearch && sheet.picoPerWebSearch === null) gaps.push('perWebSearchUsd: required where builtinTools.webSearch is enabled');
  return gaps;
}
