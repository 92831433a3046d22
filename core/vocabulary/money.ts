import { z } from 'zod';

/** Money is integer micro-USD (bigint) inside the service; the wire shows USD numbers. */
export const MICROS_PER_USD = 1_000_000n;

export function microsToUsd(micros: bigint): number {
  return Number(micros) / 1e6;
}

/** Exact for any USD amount with at most six decimals (the schema below enforces that). */
export function usdToMicros(usd: number): bigint {
  return BigInt(Math.round(usd * 1e6));
}

export const usdAmount = z
  .number()
  .finite()
  .nonnegative()
  .max(1_000_000_000)
  .refine((value) => Math.abs(value * 1e6 - Math.round(value * 1e6)) < 1e-6, 'at most six decimal places (one micro-dollar)');
