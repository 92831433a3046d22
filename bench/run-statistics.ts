/**
 * The statistics of bench/runs.ts: each figure's median and range over several runs of the bench,
 * per side (a commit, or a configuration), as aligned text and as a markdown table for the README.
 * Pure functions of the runs' results.json contents, so they are tested on their own.
 */

/** One figure of a results.json: how to read it, and how to print it. */
export interface Figure {
  label: string;
  /** Printed after the number (`ms`, `µs`, `req/s`…); empty for ratios. */
  unit: string;
  /** Decimals printed. */
  digits: number;
  /** The figure in one run's results; undefined when that run has none (an older bench, BENCH_ONLY=chat). */
  of(results: unknown): number | undefined;
}

/** A number at a dotted path of a results object (`throughput.loadedP99Ms.gateway`), if it is one. */
export function pick(results: unknown, path: string): number | undefined {
  let value: unknown = results;
  for (const key of path.split('.')) {
    if (value === null || typeof value !== 'object') return undefined;
    value = (value as Record<string, unknown>)[key];
  }
  return typeof value === 'number' && Number.isFinite(value) ? value : undefined;
}

/** A figure read at one path of results.json. */
export function at(label: string, path: string, unit: string, digits: number): Figure {
  return { label, unit, digits, of: (results) => pick(results, path) };
}

/** The nearest-rank percentile `p` (0–100) of values sorted ascending; NaN when there are none. */
export function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return NaN;
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length - 1, Math.max(0, rank - 1))]!;
}

/** The middle value; the mean of the two middle ones for an even count. */
export function median(values: number[]): number {
  if (values.length === 0) return NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2;
}

export interface Spread {
  median: number;
  min: number;
  max: number;
  /** Runs that had the figure. */
  n: number;
}

export function spread(values: number[]): Spread | null {
  if (values.length === 0) return null;
  return { median: median(values), min: Math.min(...values), max: Math.max(...values), n: values.length };
}

export interface Side {
  label: string;
  /** The results.json of each of this side's runs that finished. */
  runs: unknown[];
}

export interface FigureRow {
  figure: Figure;
  /** One per side, in the sides' order; null where no run of that side has the figure. */
  bySide: Array<Spread | null>;
}

/** A row per figure that at least one run of some side has. */
export function summarize(figures: Figure[], sides: Side[]): FigureRow[] {
  return figures
    .map((figure) => ({
      figure,
      bySide: sides.map((side) => spread(side.runs.map((results) => figure.of(results)).filter((value): value is number => value !== undefined))),
    }))
    .filter((row) => row.bySide.some((cell) => cell !== null));
}

const fixed = (value: number, digits: number) => value.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });

/** `0.234 (0.217–0.254)`: the median, then the range; the median alone when every run agrees. */
export function formatSpread(cell: Spread | null, digits: number): string {
  if (!cell) return 'n/a';
  const mid = fixed(cell.median, digits);
  const low = fixed(cell.min, digits);
  const high = fixed(cell.max, digits);
  return low === high ? mid : `${mid} (${low}–${high})`;
}

/** Side b's median against side a's, in percent (`+4.1 %`); empty when either is missing or a is 0. */
export function change(a: Spread | null, b: Spread | null): string {
  if (!a || !b || a.median === 0) return '';
  const percent = (100 * (b.median - a.median)) / Math.abs(a.median);
  return `${percent >= 0 ? '+' : '−'}${Math.abs(percent).toFixed(1)} %`;
}

function withUnit(figure: Figure): string {
  return figure.unit ? `${figure.label} (${figure.unit})` : figure.label;
}

/** The header cells: the figure, each side with its run count, and b against a when there are two sides. */
function header(sides: Side[]): string[] {
  return ['figure', ...sides.map((side) => `${side.label} (${side.runs.length} run${side.runs.length === 1 ? '' : 's'})`), ...(sides.length === 2 ? ['b vs a (medians)'] : [])];
}

function cells(row: FigureRow, sides: Side[]): string[] {
  const values = row.bySide.map((cell) => formatSpread(cell, row.figure.digits));
  return [withUnit(row.figure), ...values, ...(sides.length === 2 ? [change(row.bySide[0]!, row.bySide[1]!)] : [])];
}

/** The rows as aligned text columns, for the terminal. */
export function summaryLines(rows: FigureRow[], sides: Side[]): string[] {
  const table = [header(sides), ...rows.map((row) => cells(row, sides))];
  const widths = table[0]!.map((_, column) => Math.max(...table.map((line) => line[column]!.length)));
  return table.map((line) =>
    line
      .map((cell, column) => (column === 0 ? cell.padEnd(widths[column]!) : cell.padStart(widths[column]!)))
      .join('   ')
      .trimEnd(),
  );
}

/** The rows as a markdown table: medians with their range, one column per side. */
export function markdownTable(rows: FigureRow[], sides: Side[]): string {
  const escapePipes = (cell: string) => cell.replace(/\|/g, '\\|');
  const line = (row: string[]) => `| ${row.map(escapePipes).join(' | ')} |`;
  const head = header(sides);
  return [line(head), `|${head.map((_, column) => (column === 0 ? '---' : '---:')).join('|')}|`, ...rows.map((row) => line(cells(row, sides)))].join('\n');
}
