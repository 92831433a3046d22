import type { Calibration } from './inference-config.ts';

/**
 * Calibration of an evaluation model's answers. Every method is one map on the labels' log
 * probabilities followed by a softmax over the labels (which is also the renormalisation):
 *
 *   p'(label i) ∝ exp(a · ln p(i) + b · [i is "yes"])
 *
 * `none` is a = 1, b = 0 (renormalised only); `temperature` T is a = 1/T, b = 0; `platt` is a and b
 * as given. On a yes/no question that is Platt scaling exactly, σ(a · logit p + b); over several
 * labels a shared offset would cancel out in the softmax, so there `b` does not apply and `a` acts as
 * an inverse temperature. "Calibrated" means: of the answers given probability 0.8, about 80 % are
 * right, on data like the labelled set the parameters were fitted to (`npm run calibrate`).
 */
export interface CalibrationParameters {
  /** The slope on log probabilities (1/T for temperature scaling). */
  a: number;
  /** The offset added to the first label ("yes") of a yes/no question. */
  b: number;
}

export const IDENTITY: CalibrationParameters = { a: 1, b: 0 };

export function calibrationParameters(calibration: Calibration): CalibrationParameters {
  if (calibration.method === 'temperature') return { a: 1 / calibration.temperature, b: 0 };
  if (calibration.method === 'platt') return { a: calibration.a, b: calibration.b };
  return IDENTITY;
}

/**
 * The calibrated probability of each label, summing to 1, from the label log probabilities a
 * provider answered (which need not sum to 1: the rest of the vocabulary had some). `binary`: a
 * yes/no question, whose first label is yes.
 */
export function calibratedProbabilities(logprobs: readonly number[], parameters: CalibrationParameters, binary: boolean): number[] {
  // A label with no finite log probability ranks below every other, but must not make NaN.
  const scaled = logprobs.map((logprob, index) => parameters.a * (Number.isFinite(logprob) ? logprob : -1e4) + (binary && index === 0 ? parameters.b : 0));
  const top = Math.max(...scaled);
  const weights = scaled.map((value) => Math.exp(value - top));
  const total = weights.reduce((sum, weight) => sum + weight, 0);
  return weights.map((weight) => weight / total);
}
