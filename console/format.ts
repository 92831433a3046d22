/** Amounts as the API gives them (USD, up to micro-dollars), shown to the cent unless smaller. */
export function usd(value: number): string {
  const digits = value !== 0 && Math.abs(value) < 0.01 ? 6 : 2;
  return `$${value.toLocaleString('en-US', { minimumFractionDigits: 2, maximumFractionDigits: digits })}`;
}

/**
 * An amount the API gives to the micro-dollar (ledger lines, balances, prices: at most six decimals),
 * shown with every decimal it has, never rounded to the cent.
 */
export function usdExact(value: number): string {
  const sign = value < 0 ? '−' : '';
  return `${sign}$${Math.abs(value).toLocaleString('en-US', { minimumFractionDigits: 2, maximumFractionDigits: 6 })}`;
}

/** Integer micro-dollars as the API sends them exactly (`balanceMicros`: text), shown without a float in between. */
export function usdFromMicros(micros: string): string {
  const negative = micros.startsWith('-');
  const digits = (negative ? micros.slice(1) : micros).padStart(7, '0');
  const whole = BigInt(digits.slice(0, -6)).toLocaleString('en-US');
  const fraction = digits.slice(-6).replace(/0+$/, '').padEnd(2, '0');
  return `${negative ? '−' : ''}$${whole}.${fraction}`;
}

/** USD as whole micro-dollars, the unit the API counts in: sums of these are exact, sums of floats are not. */
export function microsOf(value: number): number {
  return Math.round(value * 1_000_000);
}

export function count(value: number): string {
  return value.toLocaleString('en-US');
}

export function percent(ratio: number): string {
  return `${(ratio * 100).toLocaleString('en-US', { maximumFractionDigits: 2 })}%`;
}

/** A time in the viewer's zone; the UTC instant goes in the element's title (shown on hover). */
export function localTime(iso: string | null): { text: string; title: string } {
  if (iso === null) return { text: 'never', title: '' };
  const date = new Date(iso);
  return { text: date.toLocaleString(), title: date.toISOString() };
}
