import t from 'tap';
import { hostingCostByTier, hostingCostMicros, priceTiersOf, tierOf } from '../../../../plugins/apps/hosting-price.ts';
import { TEST_HOSTING_PRICES } from './traffic-fixtures.ts';

const MiB = 1024 * 1024;
const prices = priceTiersOf(TEST_HOSTING_PRICES);

t.test('an instance-hour costs its memory tier’s hourly price', async (t) => {
  t.equal(hostingCostMicros([{ coversMs: 3_600_000, memoryBytes: 100 * MiB }], prices), 2_000);
  t.equal(hostingCostMicros([{ coversMs: 3_600_000, memoryBytes: 256 * MiB }], prices), 2_000, 'a tier holds its upper bound');
  t.equal(hostingCostMicros([{ coversMs: 3_600_000, memoryBytes: 256 * MiB + 1 }], prices), 4_000);
  t.equal(hostingCostMicros([{ coversMs: 1_800_000, memoryBytes: 3000 * MiB }], prices), 16_000, 'half an hour of the 4 GiB tier');
  t.equal(hostingCostMicros([{ coversMs: 3_600_000, memoryBytes: 64 * 1024 * MiB }], prices), 32_000, 'beyond the last tier: the last tier');
});

t.test('samples are summed exactly and rounded down once, in any order', async (t) => {
  // 1 s of the smallest tier is 2000/3600 µUSD: rounded per sample it would be 0.
  const second = { coversMs: 1_000, memoryBytes: MiB };
  t.equal(
    hostingCostMicros(
      Array.from({ length: 3_600 }, () => second),
      prices,
    ),
    2_000,
  );
  t.equal(hostingCostMicros([second], prices), 0);
  const mixed = [
    { coversMs: 61_234, memoryBytes: 700 * MiB },
    { coversMs: 59_999, memoryBytes: 100 * MiB },
    { coversMs: 60_001, memoryBytes: 2000 * MiB },
  ];
  const expected = Math.floor((61_234 * 8_000 + 59_999 * 2_000 + 60_001 * 16_000) / 3_600_000);
  t.equal(hostingCostMicros(mixed, prices), expected);
  t.equal(hostingCostMicros([...mixed].reverse(), prices), expected);
  t.equal(
    hostingCostMicros(
      [
        { coversMs: -5, memoryBytes: MiB },
        { coversMs: 0, memoryBytes: MiB },
      ],
      prices,
    ),
    0,
    'nothing for no time',
  );
});

t.test('a month of many instances stays exact', async (t) => {
  const month = Array.from({ length: 2_000 }, () => ({ coversMs: 30 * 86_400_000, memoryBytes: 4096 * MiB }));
  t.equal(hostingCostMicros(month, prices), 2_000 * 30 * 24 * 32_000);
});

t.test('the cost per tier adds up to the samples’ instance-seconds', async (t) => {
  const samples = [
    { coversMs: 60_000, memoryBytes: 100 * MiB },
    { coversMs: 60_000, memoryBytes: 200 * MiB },
    { coversMs: 120_000, memoryBytes: 900 * MiB },
  ];
  t.same(hostingCostByTier(samples, prices), [
    { upToBytes: 256 * MiB, microsPerHour: 2_000, instanceSeconds: 120, micros: 66 },
    { upToBytes: 1024 * MiB, microsPerHour: 8_000, instanceSeconds: 120, micros: 266 },
  ]);
  t.equal(tierOf(900 * MiB, prices).microsPerHour, 8_000);
});

t.test('the hosting configuration’s tiers, in any order, price samples by memory ascending', async (t) => {
  const tiers = priceTiersOf([...TEST_HOSTING_PRICES].reverse());
  t.same(
    tiers.tiers.map((tier) => [tier.upToBytes / MiB, tier.microsPerHour]),
    [
      [256, 2_000],
      [512, 4_000],
      [1024, 8_000],
      [2048, 16_000],
      [4096, 32_000],
    ],
  );
});
