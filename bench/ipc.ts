/**
 * Messages between the bench orchestrator (bench/gateway-overhead.ts) and its children
 * (bench/upstream-process.ts, bench/gateway-process.ts, bench/bare-proxy-process.ts), over the Node
 * IPC channel. With BENCH_WORKERS the gateway's workers talk to its primary, which relays
 * (bench/gateway-primary.ts).
 */

export type ChildMessage =
  /** `pids`: every process of a multi-process gateway (BENCH_WORKERS), its primary first. */
  | { type: 'ready'; url: string; plugins?: string[]; pids?: number[] }
  | { type: 'stats'; maxRssKiB: number; rssBytes: number; heapUsedBytes: number; externalBytes: number; afterGc: boolean }
  /** The first start (BENCH_PREPARE): the owner's one-time set-password token, for the console's sign-in (section 10). */
  | { type: 'prepared'; setPasswordToken: string | null }
  | { type: 'profile-started' }
  | { type: 'profile-written'; file: string }
  | { type: 'error'; message: string };

/**
 * `gc`: run a full garbage collection first (the gateway child runs with --expose-gc).
 * `profile-start` / `profile-stop`: BENCH_PROFILE=1 takes one CPU profile of the gateway per phase;
 * the child answers `profile-started`, then `profile-written` once the profile is in `file`.
 */
export type ParentMessage = { type: 'stats'; gc?: boolean } | { type: 'profile-start' } | { type: 'profile-stop'; file: string } | { type: 'shutdown' };

/** This process's memory, for a `stats` answer; `collect` runs a full collection first (with --expose-gc). */
export function processStats(collect = false): Extract<ChildMessage, { type: 'stats' }> {
  const gc = (globalThis as { gc?: () => void }).gc;
  if (collect && gc) gc();
  const memory = process.memoryUsage();
  return {
    type: 'stats',
    // resourceUsage().maxRSS is in KiB on Linux
    maxRssKiB: process.resourceUsage().maxRSS,
    rssBytes: memory.rss,
    heapUsedBytes: memory.heapUsed,
    // WebAssembly memories (PGlite) count here
    externalBytes: memory.external,
    afterGc: collect && gc !== undefined,
  };
}

export function isChildMessage(value: unknown): value is ChildMessage {
  return typeof value === 'object' && value !== null && typeof (value as { type?: unknown }).type === 'string';
}

/** Send a message to the parent; settles once sent, or at once when the channel is gone. */
export function tellParent(message: ChildMessage): Promise<void> {
  return new Promise((resolve) => {
    if (process.send && process.connected) process.send(message, undefined, undefined, () => resolve());
    else resolve();
  });
}

/**
 * Children exit when the parent asks, when the parent goes away (the channel closes), and on
 * SIGTERM/SIGINT, running `close` first (bounded by `graceMs`). `--cpu-prof` writes its profile on
 * this normal exit.
 */
export function exitWithParent(close: () => Promise<void>, onMessage?: (message: ParentMessage) => void, graceMs = 5_000): void {
  // The fake servers unref themselves; this keeps the child alive until it is told to stop.
  const keepAlive = setInterval(() => undefined, 60_000);
  let closing = false;
  const stop = (code: number) => {
    if (closing) return;
    closing = true;
    clearInterval(keepAlive);
    const force = setTimeout(() => process.exit(code || 1), graceMs);
    force.unref();
    close().then(
      () => process.exit(code),
      (error: unknown) => {
        process.stderr.write(`bench child: error while closing: ${String(error)}\n`);
        process.exit(1);
      },
    );
  };
  process.on('message', (message: ParentMessage) => {
    if (message?.type === 'shutdown') stop(0);
    else onMessage?.(message);
  });
  process.on('disconnect', () => stop(0));
  process.on('SIGTERM', () => stop(0));
  process.on('SIGINT', () => stop(0));
}
