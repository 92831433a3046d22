/** Amounts as the API gives them (USD, up to micro-dollars), shown to the cent unless smaller. */
export function usd(value: number): string {
  const digits = value !== 0 && Math.abs(value) < 0.01 ? 6 : 2;
  return `$${value.toLocaleString('en-US', { minimumFractionDigits: 2, maximumFractionDigits: digits })}`;
}

/** An amount to the micro-dollar, as a ledger reads: usage tables, where cents would hide small calls. */
export function usdExact(value: number): string {
  return `$${value.toLocaleString('en-US', { minimumFractionDigits: 2, maximumFractionDigits: 6 })}`;
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
