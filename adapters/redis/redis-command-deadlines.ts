import { TimeoutError } from 'redis';
import type { RedisClient } from './redis-client.ts';

/** node-redis's default: how long a command may go unanswered before it fails. */
export const COMMAND_TIMEOUT_MS = 5_000;

interface Deadline {
  at: number;
  settled: boolean;
  reject(error: Error): void;
}

/**
 * The bound on how long a command on every call's path (admission, settlement) may go unanswered,
 * kept by one interval instead of node-redis's per-command timeout: node-redis makes each command
 * an AbortSignal.timeout (a timer, a weak reference and a listener), which cost a fifth of the
 * gateway's CPU per call on the Redis path. A command still unanswered at its deadline fails with
 * node-redis's own TimeoutError, as it would have, only up to one tick later.
 *
 * `client` is the client to send such commands with: the same connection, without the timeout.
 */
export class CommandDeadlines {
  readonly client: RedisClient;
  /** In the order sent, which is the order of their deadlines (one timeout for all). */
  private readonly pending: Deadline[] = [];
  private readonly timer: NodeJS.Timeout;

  constructor(
    client: RedisClient,
    private readonly timeoutMs = COMMAND_TIMEOUT_MS,
    private readonly now: () => number = Date.now,
  ) {
    this.client = client.withCommandOptions({ timeout: 0 }) as RedisClient;
    this.timer = setInterval(() => this.expire(), Math.max(10, Math.floor(timeoutMs / 10)));
    this.timer.unref();
  }

  /** The command's answer, or TimeoutError once it has waited `timeoutMs`. */
  bound<T>(command: Promise<T>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const deadline: Deadline = { at: this.now() + this.timeoutMs, settled: false, reject };
      this.pending.push(deadline);
      command.then(
        (value) => {
          this.settle(deadline);
          resolve(value);
        },
        (error: unknown) => {
          this.settle(deadline);
          reject(error);
        },
      );
    });
  }

  close(): void {
    clearInterval(this.timer);
  }

  /** Fails the commands past their deadline (the interval's tick). */
  expire(): void {
    const now = this.now();
    while (this.pending.length > 0 && this.pending[0]!.at <= now) {
      const late = this.pending.shift()!;
      if (!late.settled) {
        late.settled = true;
        late.reject(new TimeoutError());
      }
    }
  }

  private settle(deadline: Deadline): void {
    deadline.settled = true;
    // Answers come in the order sent, so the settled ones are almost always at the front.
    while (this.pending.length > 0 && this.pending[0]!.settled) this.pending.shift();
  }
}
