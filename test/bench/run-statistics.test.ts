import t from 'tap';
import { at, change, formatSpread, markdownTable, median, pick, spread, summarize, summaryLines, type Side } from '../../bench/run-statistics.ts';

const run = (gatewayRps: number, addedP50Ms?: number) => ({ throughput: { gatewayRps }, ...(addedP50Ms === undefined ? {} : { latency: { addedP50Ms } }) });
const rps = at('gateway req/s', 'throughput.gatewayRps', 'req/s', 0);
const addedP50 = at('added p50', 'latency.addedP50Ms', 'ms', 3);

t.test('the median of an odd count is the middle value, of an even count the mean of the two middle ones', async (t) => {
  t.equal(median([5, 1, 3]), 3);
  t.equal(median([4, 1, 3, 2]), 2.5);
  t.ok(Number.isNaN(median([])));
});

t.test('a spread holds the median, the smallest and largest value and the count', async (t) => {
  t.same(spread([0.3, 0.1, 0.2, 0.5, 0.4]), { median: 0.3, min: 0.1, max: 0.5, n: 5 });
  t.equal(spread([]), null);
});

t.test('pick reads a finite number at a dotted path and nothing else', async (t) => {
  const results = { throughput: { loadedP99Ms: { gateway: 13.5 }, note: 'text', broken: Number.NaN } };
  t.equal(pick(results, 'throughput.loadedP99Ms.gateway'), 13.5);
  t.equal(pick(results, 'throughput.note'), undefined);
  t.equal(pick(results, 'throughput.broken'), undefined);
  t.equal(pick(results, 'pacedStreams.addedP50Ms'), undefined);
  t.equal(pick(null, 'throughput'), undefined);
});

t.test('a side whose runs lack a figure shows none, and a figure no run has is left out', async (t) => {
  const sides: Side[] = [
    { label: 'new', runs: [run(3000, 0.2), run(3200, 0.4), run(3100, 0.3)] },
    { label: 'old', runs: [run(2900), run(2800)] },
  ];
  const rows = summarize([rps, addedP50, at('batch lines/s', 'batch.batchLinesPerSecond', 'lines/s', 0)], sides);
  t.same(
    rows.map((row) => row.figure.label),
    ['gateway req/s', 'added p50'],
  );
  t.same(rows[0]!.bySide, [
    { median: 3100, min: 3000, max: 3200, n: 3 },
    { median: 2850, min: 2800, max: 2900, n: 2 },
  ]);
  t.same(rows[1]!.bySide, [{ median: 0.3, min: 0.2, max: 0.4, n: 3 }, null]);
});

t.test('a spread prints as its median with the range, or the median alone when every run agrees', async (t) => {
  t.equal(formatSpread({ median: 7152.4, min: 6914, max: 7730, n: 3 }, 0), '7,152 (6,914–7,730)');
  t.equal(formatSpread({ median: 0.2, min: 0.2, max: 0.2, n: 2 }, 3), '0.200');
  t.equal(formatSpread(null, 3), 'n/a');
});

t.test("side b's median is given against side a's in percent", async (t) => {
  const of = (median: number) => ({ median, min: median, max: median, n: 1 });
  t.equal(change(of(200), of(150)), '−25.0 %');
  t.equal(change(of(0.2), of(0.25)), '+25.0 %');
  t.equal(change(of(0), of(1)), '');
  t.equal(change(null, of(1)), '');
});

t.test('the markdown table has a column per side with its run count, and b against a for two sides', async (t) => {
  const sides: Side[] = [
    { label: 'memory', runs: [run(3000, 0.2), run(3200, 0.4)] },
    { label: 'redis | 2 workers', runs: [run(2400, 0.6)] },
  ];
  const table = markdownTable(summarize([rps, addedP50], sides), sides);
  t.equal(
    table,
    [
      '| figure | memory (2 runs) | redis \\| 2 workers (1 run) | b vs a (medians) |',
      '|---|---:|---:|---:|',
      '| gateway req/s (req/s) | 3,100 (3,000–3,200) | 2,400 | −22.6 % |',
      '| added p50 (ms) | 0.300 (0.200–0.400) | 0.600 | +100.0 % |',
    ].join('\n'),
  );
});

t.test('the text summary aligns every column, and one side has no comparison column', async (t) => {
  const sides: Side[] = [{ label: 'main', runs: [run(3000, 0.25)] }];
  const lines = summaryLines(summarize([rps, addedP50], sides), sides);
  t.same(lines, ['figure                  main (1 run)', 'gateway req/s (req/s)          3,000', 'added p50 (ms)                 0.250']);
});
