import t from 'tap';
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { calibratedProbabilities, calibrationParameters } from '../../../plugins/inference/evaluate-calibration.ts';
import { calibrationReport, fitPlatt, fitTemperature, parseLabelledFile, parseLabelledLine, scores, type LabelledAnswer } from '../../../plugins/inference/evaluate-calibration-fit.ts';
import { IDENTITY } from '../../../plugins/inference/evaluate-calibration.ts';
import { seededRandom } from '../../fixtures/input-fuzz.ts';

/** Calibration of evaluation answers: the map applied at answer time, the fitting, and `npm run calibrate`. */

t.setTimeout(240_000);

const sigmoid = (x: number) => 1 / (1 + Math.exp(-x));
const softmax = (zs: number[]) => {
  const top = Math.max(...zs);
  const ws = zs.map((z) => Math.exp(z - top));
  const total = ws.reduce((a, b) => a + b, 0);
  return ws.map((w) => w / total);
};

/**
 * A labelled set with a known miscalibration: each answer's true probabilities come from logits
 * drawn at random, the outcome is drawn from them, and the model reports softmax(overconfidence ·
 * logits + bias on yes): with overconfidence 2 it is overconfident by a temperature of 2.
 */
function syntheticSet({ seed, count, overconfidence, yesBias = 0, several = 0 }: { seed: number; count: number; overconfidence: number; yesBias?: number; several?: number }) {
  const random = seededRandom(seed);
  const answers: LabelledAnswer[] = [];
  for (let i = 0; i < count; i++) {
    const labels = several > 0 && i % 2 === 1 ? several : 2;
    const logits = Array.from({ length: labels }, () => (random() - 0.5) * 4);
    const truth = softmax(logits);
    let draw = random();
    let outcome = 0;
    while (outcome < labels - 1 && draw >= truth[outcome]!) draw -= truth[outcome++]!;
    const binary = labels === 2;
    const reported = softmax(logits.map((z, index) => overconfidence * z + (binary && index === 0 ? yesBias : 0)));
    answers.push({ probabilities: reported, outcome, binary });
  }
  return answers;
}

t.test('temperature T is Platt with a = 1/T and b = 0, and the answer sums to 1', async (t) => {
  const logprobs = [Math.log(0.6), Math.log(0.25), Math.log(0.05)];
  const byTemperature = calibratedProbabilities(logprobs, calibrationParameters({ method: 'temperature', temperature: 2 }), false);
  const byPlatt = calibratedProbabilities(logprobs, calibrationParameters({ method: 'platt', a: 0.5, b: 3 }), false);
  t.same(byTemperature, byPlatt, 'b does not apply over several labels');
  t.ok(Math.abs(byTemperature.reduce((a, b) => a + b, 0) - 1) < 1e-12);
  const expected = softmax(logprobs.map((l) => l / 2));
  byTemperature.forEach((p, i) => {
    t.ok(Math.abs(p - expected[i]!) < 1e-12, `label ${i}: p^(1/T), renormalised`);
  });
});

t.test('none renormalises over the labels only', async (t) => {
  const probabilities = calibratedProbabilities([Math.log(0.45), Math.log(0.45)], calibrationParameters({ method: 'none' }), true);
  t.same(probabilities, [0.5, 0.5]);
});

t.test('on a yes/no question Platt is σ(a · logit p + b) for yes', async (t) => {
  const p = 0.8;
  const [yes, no] = calibratedProbabilities([Math.log(p), Math.log(1 - p)], { a: 0.7, b: -0.4 }, true);
  const expected = sigmoid(0.7 * Math.log(p / (1 - p)) - 0.4);
  t.ok(Math.abs(yes! - expected) < 1e-12, `${yes} ≈ ${expected}`);
  t.ok(Math.abs(yes! + no! - 1) < 1e-12);
});

t.test('overconfident by temperature 2: the fitted temperature is about 2 and the calibration error falls', async (t) => {
  const answers = syntheticSet({ seed: 21, count: 4000, overconfidence: 2, several: 4 });
  const fitted = fitTemperature(answers);
  const temperature = 1 / fitted.a;
  t.ok(temperature > 1.8 && temperature < 2.2, `fitted T = ${temperature}`);
  const before = scores(answers, IDENTITY);
  const after = scores(answers, fitted);
  t.ok(after.ece < before.ece / 2, `ECE ${before.ece.toFixed(4)} → ${after.ece.toFixed(4)}`);
  t.ok(after.ece < 0.03, `ECE after ${after.ece.toFixed(4)}`);
  t.ok(after.brier < before.brier, `Brier ${before.brier.toFixed(4)} → ${after.brier.toFixed(4)}`);
  t.ok(after.logLoss < before.logLoss);
  t.equal(calibrationReport(answers).recommended.method, 'temperature', 'recommended: Platt fits no better where there is no bias on yes');
});

t.test('a bias towards yes as well: Platt recovers slope and offset, and beats temperature', async (t) => {
  const answers = syntheticSet({ seed: 7, count: 4000, overconfidence: 2, yesBias: 1 });
  const platt = fitPlatt(answers);
  t.ok(Math.abs(platt.a - 0.5) < 0.06, `a = ${platt.a}`);
  // softmax(2z + 1 on yes) calibrated by a = 1/2 leaves 1/2 on yes: b ≈ −0.5 undoes it.
  t.ok(Math.abs(platt.b + 0.5) < 0.15, `b = ${platt.b}`);
  const before = scores(answers, IDENTITY);
  const byTemperature = scores(answers, fitTemperature(answers));
  const byPlatt = scores(answers, platt);
  t.ok(byPlatt.ece < before.ece, `ECE ${before.ece.toFixed(4)} → ${byPlatt.ece.toFixed(4)}`);
  t.ok(byPlatt.logLoss < byTemperature.logLoss);
  t.equal(calibrationReport(answers).recommended.method, 'platt', 'recommended: the offset is warranted by the data');
});

t.test('labelled lines: answers as /v1/evaluate gives them, plus the outcome', async (t) => {
  t.same(parseLabelledLine('{"probability": 0.8, "outcome": false}', 1), { probabilities: [0.8, 0.19999999999999996], outcome: 1, binary: true });
  t.same(parseLabelledLine('{"selected": "blue", "probabilities": {"red": 0.3, "blue": 0.7}, "outcome": "red"}', 2), {
    probabilities: [0.3, 0.7],
    outcome: 0,
    binary: false,
  });
  t.same(parseLabelledLine('{"value": 2.4, "probabilities": {"1": 0.2, "2": 0.2, "3": 0.6}, "outcome": 3}', 3).outcome, 2, 'a rung by its number');
  t.throws(() => parseLabelledLine('{"probability": 0.8, "outcome": "yes"}', 4), /line 4: .*outcome true or false/);
  t.throws(() => parseLabelledLine('{"probabilities": {"a": 0.5, "b": 0.5}, "outcome": "c"}', 5), /line 5: outcome "c" is not among the labels: a, b/);
  t.throws(() => parseLabelledLine('{"probability": 1.5, "outcome": true}', 6), /line 6: probability must be a number from 0 to 1/);
  t.throws(() => parseLabelledFile('{"probability": 0.5, "outcome": true}\n\nnot json\n'), /line 3: not JSON/);
});

t.test('npm run calibrate prints the scores before and after, and the snippet to paste', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'svc-calibrate-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const file = join(dir, 'labelled.jsonl');
  const lines = syntheticSet({ seed: 3, count: 1500, overconfidence: 2 }).map((answer) => JSON.stringify({ probability: answer.probabilities[0], outcome: answer.outcome === 0 }));
  writeFileSync(file, `${lines.join('\n')}\n`);
  const { stdout } = await promisify(execFile)(process.execPath, ['--import', 'tsx', 'tools/calibrate.ts', file], { timeout: 120_000 });
  t.match(stdout, /1500 labelled answers from .*labelled\.jsonl \(1500 yes\/no, 0 over several labels\)/);
  const ece = (row: string) => Number(new RegExp(`^${row}.*?\\s(\\d\\.\\d{4})\\s+\\d\\.\\d{4}\\s+\\d\\.\\d{4}$`, 'm').exec(stdout)?.[1]);
  const before = ece('before');
  const after = ece('temperature T = ');
  t.ok(after < before, `ECE before ${before}, after ${after}`);
  t.match(stdout, /^ {8}evaluation: \{ calibration: \{ method: (temperature, temperature|platt, a): [\d.]+.*\} \}$/m, 'the config snippet');
});

t.test('npm run calibrate names the bad line and exits 1', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'svc-calibrate-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const file = join(dir, 'labelled.jsonl');
  writeFileSync(file, '{"probability": 0.5, "outcome": true}\n{"probability": 0.5}\n');
  const failed = await promisify(execFile)(process.execPath, ['--import', 'tsx', 'tools/calibrate.ts', file], { timeout: 120_000 }).then(
    () => null,
    (error: { code: number; stderr: string }) => error,
  );
  t.equal(failed?.code, 1);
  t.match(failed?.stderr, /^line 2: a yes\/no answer \(probability\) needs outcome true or false/);
});
