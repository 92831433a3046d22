import { calibratedProbabilities, IDENTITY, type CalibrationParameters } from './evaluate-calibration.ts';
import type { Calibration } from './inference-config.ts';

/**
 * Fitting an evaluation model's calibration (`npm run calibrate`, tools/calibrate.ts) to labelled
 * answers, and measuring it: expected calibration error, Brier score and log loss before and
 * after. Both methods minimise the log loss of the labelled outcomes, which is convex in their
 * parameters (a and b enter the softmax linearly), so a one-dimensional search on each is exact
 * enough: golden-section search, on ln a for the slope and on b inside it for Platt.
 */

/** One labelled answer: each label's probability as the model gave it (uncalibrated), and which label was right. */
export interface LabelledAnswer {
  probabilities: number[];
  /** Index into `probabilities` of the label that was right. */
  outcome: number;
  /** A yes/no question: its first label is yes, and Platt's `b` applies to it. */
  binary: boolean;
}

export class LabelledLineError extends Error {}

const isObject = (value: unknown): value is Record<string, unknown> => value !== null && typeof value === 'object' && !Array.isArray(value);

/**
 * A line of the labelled file: an answer as `/v1/evaluate` gives it (from a model without
 * calibration, `method: none`), plus `outcome`. `{"probability": 0.8, "outcome": true}` for a
 * yes/no question; `{"probabilities": {"red": 0.7, "blue": 0.3}, "outcome": "red"}` for a choice,
 * and for a score the rung that was right (`"outcome": 4`). Other fields (`selected`, `value`) are
 * ignored, so answers can be pasted as they came.
 */
export function parseLabelledLine(line: string, lineNumber: number): LabelledAnswer {
  const fail = (message: string) => new LabelledLineError(`line ${lineNumber}: ${message}`);
  let value: unknown;
  try {
    value = JSON.parse(line);
  } catch {
    throw fail('not JSON');
  }
  if (!isObject(value)) throw fail('expected a JSON object');
  const { probability, probabilities, outcome } = value;
  if (probability !== undefined && probabilities !== undefined) throw fail('has both probability and probabilities; a line is one answer');
  if (probability !== undefined) {
    if (typeof probability !== 'number' || !(probability >= 0 && probability <= 1)) throw fail('probability must be a number from 0 to 1');
    if (typeof outcome !== 'boolean') throw fail('a yes/no answer (probability) needs outcome true or false');
    return { probabilities: [probability, 1 - probability], outcome: outcome ? 0 : 1, binary: true };
  }
  if (!isObject(probabilities)) throw fail('needs probability (a yes/no answer) or probabilities (per option or rung)');
  const labels = Object.keys(probabilities);
  const values = Object.values(probabilities);
  if (labels.length < 2) throw fail('probabilities needs at least two labels');
  if (!values.every((p) => typeof p === 'number' && p >= 0 && p <= 1)) throw fail('each probability must be a number from 0 to 1');
  if (typeof outcome !== 'string' && typeof outcome !== 'number') throw fail(`outcome must be one of the labels: ${labels.join(', ')}`);
  const index = labels.indexOf(String(outcome));
  if (index === -1) throw fail(`outcome ${JSON.stringify(outcome)} is not among the labels: ${labels.join(', ')}`);
  return { probabilities: values as number[], outcome: index, binary: false };
}

/** Every non-blank line of a labelled file. */
export function parseLabelledFile(text: string): LabelledAnswer[] {
  const answers: LabelledAnswer[] = [];
  text.split('\n').forEach((line, index) => {
    if (line.trim() !== '') answers.push(parseLabelledLine(line, index + 1));
  });
  return answers;
}

/** Log probabilities kept off -Infinity: a label given 0 that turned out right must cost a finite loss. */
const FLOOR = 1e-9;
const logsOf = (answer: LabelledAnswer) => answer.probabilities.map((p) => Math.log(Math.max(p, FLOOR)));

function calibrated(answers: readonly LabelledAnswer[], parameters: CalibrationParameters): number[][] {
  return answers.map((answer) => calibratedProbabilities(logsOf(answer), parameters, answer.binary));
}

export interface CalibrationScores {
  /** Expected calibration error: see expectedCalibrationError. */
  ece: number;
  /** Mean squared error of the probabilities against what happened: see brierScore. */
  brier: number;
  /** Mean negative log probability of what happened (what the fit minimises). */
  logLoss: number;
}

/**
 * Expected calibration error over the top label of each answer: answers are put in ten bins by the
 * probability of their likeliest label; for each bin, the gap between that mean probability and how
 * often the likeliest label was right; the gaps averaged, weighted by each bin's share of answers.
 */
export function expectedCalibrationError(probabilities: readonly number[][], outcomes: readonly number[], bins = 10): number {
  const confidence = new Array<number>(bins).fill(0);
  const right = new Array<number>(bins).fill(0);
  const count = new Array<number>(bins).fill(0);
  probabilities.forEach((ps, index) => {
    const top = ps.reduce((best, p, i) => (p > ps[best]! ? i : best), 0);
    const bin = Math.min(bins - 1, Math.floor(ps[top]! * bins));
    confidence[bin]! += ps[top]!;
    right[bin]! += top === outcomes[index] ? 1 : 0;
    count[bin]! += 1;
  });
  let error = 0;
  for (let bin = 0; bin < bins; bin++) if (count[bin]! > 0) error += Math.abs(confidence[bin]! - right[bin]!) / probabilities.length;
  return error;
}

/**
 * The Brier score: for a yes/no answer (p − outcome)², p being yes's probability; for an answer over
 * several labels the squared errors summed over its labels (the multi-class Brier score); averaged.
 */
export function brierScore(probabilities: readonly number[][], answers: readonly LabelledAnswer[]): number {
  let total = 0;
  probabilities.forEach((ps, index) => {
    const { outcome, binary } = answers[index]!;
    if (binary) total += (ps[0]! - (outcome === 0 ? 1 : 0)) ** 2;
    else total += ps.reduce((sum, p, i) => sum + (p - (i === outcome ? 1 : 0)) ** 2, 0);
  });
  return total / probabilities.length;
}

export function scores(answers: readonly LabelledAnswer[], parameters: CalibrationParameters): CalibrationScores {
  const probabilities = calibrated(answers, parameters);
  const outcomes = answers.map((answer) => answer.outcome);
  const logLoss = -probabilities.reduce((sum, ps, index) => sum + Math.log(Math.max(ps[outcomes[index]!]!, FLOOR)), 0) / answers.length;
  return { ece: expectedCalibrationError(probabilities, outcomes), brier: brierScore(probabilities, answers), logLoss };
}

/** ln(1 + e^x), without overflow. */
const softplus = (x: number) => (x > 0 ? x + Math.log1p(Math.exp(-x)) : Math.log1p(Math.exp(x)));

/**
 * The log loss of the answers, split by what it depends on: answers over several labels on a only,
 * yes/no answers on a and b (from ln p(yes) − ln p(no): σ(a·d + b) is yes's calibrated
 * probability). Logarithms are taken once, here, not on every step of the search.
 */
function lossTerms(answers: readonly LabelledAnswer[]) {
  const binary = answers.filter((answer) => answer.binary).map((answer) => ({ d: logsOf(answer)[0]! - logsOf(answer)[1]!, sign: answer.outcome === 0 ? 1 : -1 }));
  const several = answers.filter((answer) => !answer.binary).map((answer) => ({ logs: logsOf(answer), outcome: answer.outcome }));
  return {
    several(a: number): number {
      let loss = 0;
      for (const { logs, outcome } of several) {
        const top = a * Math.max(...logs);
        let total = 0;
        for (const logprob of logs) total += Math.exp(a * logprob - top);
        loss += top + Math.log(total) - a * logs[outcome]!;
      }
      return loss;
    },
    binary(a: number, b: number): number {
      let loss = 0;
      for (const { d, sign } of binary) loss += softplus(-sign * (a * d + b));
      return loss;
    },
  };
}

/** The minimum of a unimodal function on [low, high], to within (high − low)·0.618^iterations. */
function goldenSection(f: (x: number) => number, low: number, high: number, iterations = 60): number {
  const ratio = (Math.sqrt(5) - 1) / 2;
  let lo = low;
  let hi = high;
  let x1 = hi - ratio * (hi - lo);
  let x2 = lo + ratio * (hi - lo);
  let f1 = f(x1);
  let f2 = f(x2);
  for (let i = 0; i < iterations; i++) {
    if (f1 <= f2) {
      hi = x2;
      x2 = x1;
      f2 = f1;
      x1 = hi - ratio * (hi - lo);
      f1 = f(x1);
    } else {
      lo = x1;
      x1 = x2;
      f1 = f2;
      x2 = lo + ratio * (hi - lo);
      f2 = f(x2);
    }
  }
  return (lo + hi) / 2;
}

/** The slope is searched on ln a over a from 0.01 to 100 (temperatures 100 to 0.01), as config allows. */
const LN_A = [Math.log(0.01), Math.log(100)] as const;
const B_RANGE = [-50, 50] as const;

/** Temperature scaling: the a = 1/T (b = 0) that minimises the log loss. */
export function fitTemperature(answers: readonly LabelledAnswer[]): CalibrationParameters {
  const loss = lossTerms(answers);
  const at = (a: number) => loss.several(a) + loss.binary(a, 0);
  return { a: Math.exp(goldenSection((lnA) => at(Math.exp(lnA)), ...LN_A)), b: 0 };
}

/** Platt scaling: the a and b that minimise the log loss (b only where there are yes/no answers). */
export function fitPlatt(answers: readonly LabelledAnswer[]): CalibrationParameters {
  if (!answers.some((answer) => answer.binary)) return fitTemperature(answers);
  const loss = lossTerms(answers);
  const bestB = (a: number) => goldenSection((b) => loss.binary(a, b), ...B_RANGE);
  const at = (a: number) => loss.several(a) + loss.binary(a, bestB(a));
  const a = Math.exp(goldenSection((lnA) => at(Math.exp(lnA)), ...LN_A));
  return { a, b: bestB(a) };
}

export interface CalibrationReport {
  answers: number;
  binary: number;
  before: CalibrationScores;
  temperature: { calibration: Calibration; scores: CalibrationScores };
  platt: { calibration: Calibration; scores: CalibrationScores };
  /**
   * What to paste: Platt where its offset is warranted by the data (it lowers the log loss by more
   * than a likelihood-ratio test at 5 % allows chance to: 2·n·Δ > 3.84), temperature otherwise.
   */
  recommended: Calibration;
}

const rounded = (value: number) => Number(value.toPrecision(4));
/** The 95th percentile of χ² with one degree of freedom (Platt's one parameter more). */
const CHI_SQUARE_1_DF_5_PERCENT = 3.841;

export function calibrationReport(answers: readonly LabelledAnswer[]): CalibrationReport {
  if (answers.length === 0) throw new LabelledLineError('no labelled answers to fit');
  const temperature = fitTemperature(answers);
  const platt = fitPlatt(answers);
  const asTemperature: Calibration = { method: 'temperature', temperature: rounded(1 / temperature.a) };
  const asPlatt: Calibration = { method: 'platt', a: rounded(platt.a), b: rounded(platt.b) };
  const temperatureScores = scores(answers, temperature);
  const plattScores = scores(answers, platt);
  return {
    answers: answers.length,
    binary: answers.filter((answer) => answer.binary).length,
    before: scores(answers, IDENTITY),
    temperature: { calibration: asTemperature, scores: temperatureScores },
    platt: { calibration: asPlatt, scores: plattScores },
    recommended: 2 * answers.length * (temperatureScores.logLoss - plattScores.logLoss) > CHI_SQUARE_1_DF_5_PERCENT ? asPlatt : asTemperature,
  };
}

/** The report as the tool prints it: scores before and after each fit, and the config snippet to paste. */
export function formatCalibrationReport(report: CalibrationReport, source: string): string {
  const row = (name: string, s: CalibrationScores) => `${name.padEnd(34)}${s.ece.toFixed(4).padStart(8)}${s.brier.toFixed(4).padStart(10)}${s.logLoss.toFixed(4).padStart(10)}`;
  const t = report.temperature.calibration as Extract<Calibration, { method: 'temperature' }>;
  const p = report.platt.calibration as Extract<Calibration, { method: 'platt' }>;
  const snippet = (c: Calibration) =>
    c.method === 'temperature' ? `{ method: temperature, temperature: ${c.temperature} }` : c.method === 'platt' ? `{ method: platt, a: ${c.a}, b: ${c.b} }` : '{ method: none }';
  return [
    `${report.answers} labelled answers from ${source} (${report.binary} yes/no, ${report.answers - report.binary} over several labels)`,
    '',
    `${''.padEnd(34)}${'ECE'.padStart(8)}${'Brier'.padStart(10)}${'log loss'.padStart(10)}`,
    row('before (as the model gave them)', report.before),
    row(`temperature T = ${t.temperature}`, report.temperature.scores),
    row(`platt a = ${p.a}, b = ${p.b}`, report.platt.scores),
    '',
    `Paste under the model in plugins.inference.models (${report.recommended.method === 'platt' ? 'Platt: its offset on yes is warranted by the data' : 'temperature: Platt would not fit the data significantly better'}):`,
    '',
    `        evaluation: { calibration: ${snippet(report.recommended)} }`,
    '',
  ].join('\n');
}
