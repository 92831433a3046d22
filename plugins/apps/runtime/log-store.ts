import { EventEmitter } from 'node:events';
import { appendFileSync, mkdirSync, renameSync, statSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import type { LogLine, LogOptions } from './runtime-port.ts';

/**
 * Each service's log: one JSON line per output line (`{at, deploymentId, stream, line}`), appended
 * to `<dir>/<serviceId>.log` and rotated by size to `.1`, `.2`…, so the lines of earlier deploys and
 * of a host that died survive. Appends are synchronous: one write per chunk an app emits keeps the
 * order, and a reader that noted the size has seen every line written before it.
 */
export interface LogStoreOptions {
  dir: string;
  /** Rotate once the current file passes this size (default 5 MiB). */
  maxBytes?: number;
  /** Rotated files kept besides the current one (default 2). */
  keep?: number;
}

/** A line longer than this is cut: one runaway line must not become one huge record. */
const MAX_LINE_CHARS = 16_384;

export class LogStore {
  private readonly dir: string;
  private readonly maxBytes: number;
  private readonly keep: number;
  private readonly sizes = new Map<string, number>();
  private readonly appended = new EventEmitter().setMaxListeners(0);

  constructor(options: LogStoreOptions) {
    this.dir = options.dir;
    this.maxBytes = options.maxBytes ?? 5 * 1024 * 1024;
    this.keep = options.keep ?? 2;
    mkdirSync(this.dir, { recursive: true });
  }

  append(serviceId: string, lines: readonly LogLine[]): void {
    if (lines.length === 0) return;
    const file = this.fileOf(serviceId, 0);
    const text = lines.map((line) => `${JSON.stringify({ ...line, line: line.line.slice(0, MAX_LINE_CHARS) })}\n`).join('');
    appendFileSync(file, text);
    const size = (this.sizes.get(serviceId) ?? sizeOf(file) - Buffer.byteLength(text)) + Buffer.byteLength(text);
    this.sizes.set(serviceId, size);
    if (size > this.maxBytes) this.rotate(serviceId);
    for (const line of lines) this.appended.emit(serviceId, line);
  }

  /** The stored lines, oldest first; with `follow`, then each new one until the consumer stops. */
  async *read(serviceId: string, options: LogOptions = {}): AsyncGenerator<LogLine> {
    const since = options.since?.getTime() ?? Number.NEGATIVE_INFINITY;
    const pending: LogLine[] = [];
    let wake: (() => void) | null = null;
    const listener = (line: LogLine) => {
      pending.push(line);
      wake?.();
    };
    // Subscribed before reading: appends are synchronous, so nothing falls between the files and the feed.
    if (options.follow) this.appended.on(serviceId, listener);
    // The current file is read up to its size now: what comes after is in `pending`, not twice.
    const currentBytes = sizeOf(this.fileOf(serviceId, 0));
    try {
      for (let generation = this.keep; generation >= 0; generation--) {
        const limit = generation === 0 ? currentBytes : Number.POSITIVE_INFINITY;
        for (const line of await readLines(this.fileOf(serviceId, generation), limit)) {
          if (Date.parse(line.at) >= since) yield line;
        }
      }
      if (!options.follow) return;
      const stop = () => wake?.();
      options.signal?.addEventListener('abort', stop, { once: true });
      try {
        for (;;) {
          while (pending.length > 0) yield pending.shift()!;
          if (options.signal?.aborted) return;
          await new Promise<void>((resolve) => {
            wake = resolve;
          });
          wake = null;
        }
      } finally {
        options.signal?.removeEventListener('abort', stop);
      }
    } finally {
      this.appended.off(serviceId, listener);
    }
  }

  /** Starts a fresh current file; the lines so far move to the older generations (the oldest dropped). */
  rotate(serviceId: string): void {
    for (let generation = this.keep; generation >= 1; generation--) {
      try {
        renameSync(this.fileOf(serviceId, generation - 1), this.fileOf(serviceId, generation));
      } catch {}
    }
    this.sizes.set(serviceId, 0);
  }

  private fileOf(serviceId: string, generation: number): string {
    // Service ids are the apps plugin's uuids; anything else is encoded so it cannot leave the folder.
    const name = encodeURIComponent(serviceId);
    return path.join(this.dir, generation === 0 ? `${name}.log` : `${name}.log.${generation}`);
  }
}

function sizeOf(file: string): number {
  try {
    return statSync(file).size;
  } catch {
    return 0;
  }
}

async function readLines(file: string, limitBytes: number): Promise<LogLine[]> {
  let text: string;
  try {
    const bytes = await readFile(file);
    text = bytes.subarray(0, Math.min(bytes.length, limitBytes)).toString('utf8');
  } catch {
    return [];
  }
  const lines: LogLine[] = [];
  for (const raw of text.split('\n')) {
    if (raw === '') continue;
    try {
      lines.push(JSON.parse(raw) as LogLine);
    } catch {
      // A line cut by a host killed mid-write: the rest of the file is still readable.
    }
  }
  return lines;
}
