import { z } from 'zod';
import { microsToUsd, usdAmount, usdToMicros } from '../vocabulary/money.ts';
import type { SpendCap } from '../ports/identity.ts';

/** One wire shape for a spend cap wherever one is set: keys, projects, the account. */
export const spendCapInput = z.strictObject({
  usd: usdAmount.describe('Cap in USD for the period'),
  period: z.enum(['day', 'week', 'month', 'total']).default('month'),
  mode: z.enum(['blocking', 'alert']).default('blocking').describe('blocking answers 402 at the cap; alert only records a warning'),
});

export const spendCapView = z
  .object({
    usd: z.number(),
    period: z.enum(['day', 'week', 'month', 'total']),
    mode: z.enum(['blocking', 'alert']),
  })
  .meta({ id: 'SpendCap', description: 'A spend cap: USD per period; blocking answers 402 at the cap, alert only records a warning' });

export function toSpendCap(input: z.output<typeof spendCapInput> | null): SpendCap | null {
  return input ? { limitMicros: usdToMicros(input.usd), period: input.period, mode: input.mode } : null;
}

export function toSpendCapView(cap: SpendCap | null): z.infer<typeof spendCapView> | null {
  return cap ? { usd: microsToUsd(cap.limitMicros), period: cap.period, mode: cap.mode } : null;
}
