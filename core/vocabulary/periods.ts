import type { SpendPeriod } from '../ports/identity.ts';

/** Start of the UTC period containing `now`: day, ISO week (Monday), calendar month; epoch for total. */
export function periodStart(period: SpendPeriod, now: Date): Date {
  const y = now.getUTCFullYear();
  const m = now.getUTCMonth();
  const d = now.getUTCDate();
  switch (period) {
    case 'day':
      return new Date(Date.UTC(y, m, d));
    case 'week': {
      const sinceMonday = (now.getUTCDay() + 6) % 7;
      return new Date(Date.UTC(y, m, d - sinceMonday));
    }
    case 'month':
      return new Date(Date.UTC(y, m, 1));
    case 'total':
      return new Date(0);
  }
}
