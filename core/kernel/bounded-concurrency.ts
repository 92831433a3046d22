/**
 * At most `limit` tasks at once; later ones wait their turn in arrival order, and once `maxWaiting`
 * are already waiting a further one is refused with `refusal()` instead of queueing without end.
 * For work whose cost is memory held while it runs (a password hash holds 32 MiB), where a burst
 * must queue rather than all run together.
 */
export class BoundedConcurrency {
  private running = 0;
  private readonly waiting: Array<() => void> = [];

  constructor(
    private readonly limit: number,
    private readonly maxWaiting: number,
    private readonly refusal: () => Error,
  ) {}

  async run<T>(task: () => Promise<T>): Promise<T> {
    if (this.running >= this.limit) {
      if (this.waiting.length >= this.maxWaiting) throw this.refusal();
      // The slot is handed over by release(), so `running` already counts this task when it wakes.
      await new Promise<void>((resolve) => this.waiting.push(resolve));
    } else {
      this.running += 1;
    }
    try {
      return await task();
    } finally {
      this.release();
    }
  }

  private release(): void {
    const next = this.waiting.shift();
    if (next) next();
    else this.running -= 1;
  }
}
