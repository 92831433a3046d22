import { createHash } from 'node:crypto';

export function stableHash(value: unknown): string {
  return createHash('sha256').update(JSON.stringify(value)).digest('hex');
}

/**
 * A small seeded generator (mulberry32): the mock's "sampling". Seeded from a hash of what
 * decides the answer (request, `seed`, choice index), so the same inputs always draw the same
 * numbers while a different seed or choice draws others.
 */
export class MockRandom {
  private state: number;

  constructor(...seedParts: unknown[]) {
    this.state = Number.parseInt(stableHash(seedParts).slice(0, 8), 16) >>> 0;
  }

  /** A float in [0, 1). */
  next(): number {
    this.state = (this.state + 0x6d2b79f5) >>> 0;
    let x = this.state;
    x = Math.imul(x ^ (x >>> 15), x | 1);
    x ^= x + Math.imul(x ^ (x >>> 7), x | 61);
    return ((x ^ (x >>> 14)) >>> 0) / 4294967296;
  }

  /** An integer in [min, max], both included. */
  integer(min: number, max: number): number {
    return min + Math.floor(this.next() * (max - min + 1));
  }

  pick<T>(items: readonly T[]): T {
    return items[Math.floor(this.next() * items.length)]!;
  }
}
