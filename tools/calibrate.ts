import { readFile } from 'node:fs/promises';
import { calibrationReport, formatCalibrationReport, LabelledLineError, parseLabelledFile } from '../plugins/inference/evaluate-calibration-fit.ts';

/**
 * `npm run calibrate -- labelled.jsonl`: fits an evaluation model's calibration (temperature and
 * Platt) to labelled answers and prints the expected calibration error, Brier score and log loss
 * before and after, and the config snippet to paste. The file's lines and what the scores mean:
 * plugins/inference/README.md, "Evaluate".
 */
const USAGE = `Usage: npm run calibrate -- labelled.jsonl

Each line: an answer /v1/evaluate gave (from the model with calibration { method: none }) and what was right:
  {"probability": 0.83, "outcome": true}
  {"probabilities": {"red": 0.7, "blue": 0.3}, "outcome": "red"}
  {"probabilities": {"1": 0.1, "2": 0.2, "3": 0.7}, "outcome": 3}
`;

async function main(args: readonly string[]): Promise<number> {
  const [path, ...rest] = args;
  if (!path || rest.length > 0 || path === '--help' || path === '-h') {
    process.stderr.write(USAGE);
    return path === '--help' || path === '-h' ? 0 : 2;
  }
  const report = calibrationReport(parseLabelledFile(await readFile(path, 'utf8')));
  process.stdout.write(formatCalibrationReport(report, path));
  return 0;
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (error: unknown) => {
    process.stderr.write(`${error instanceof LabelledLineError ? error.message : error instanceof Error ? error.message : String(error)}\n`);
    process.exit(1);
  },
);
