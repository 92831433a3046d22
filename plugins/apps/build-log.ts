import { appendFileSync, mkdirSync } from 'node:fs';
import { open, rm } from 'node:fs/promises';
import path from 'node:path';

/**
 * A running build's log: `<build.dir>/logs/<deploymentId>.log`, one `<ISO time> <stream> <text>`
 * line per line, appended as the build prints (synchronously: the order is the build's). The API
 * reads it while the deployment runs (`complete: false`) and follows it; once the deployment is
 * finished its log is the blob (deploy-pipeline.ts stores it before marking the deployment finished)
 * and this file is removed. The file is on the worker's disk: the API answering from another machine
 * sees the lines only once the blob is stored (README: live build logs).
 */
export class BuildLogFiles {
  constructor(readonly dir: string) {}

  fileOf(deploymentId: string): string {
    return path.join(this.dir, `${deploymentId}.log`);
  }

  /** Starts the run's file afresh (a run again after an interruption logs from the start). */
  async begin(deploymentId: string): Promise<void> {
    mkdirSync(this.dir, { recursive: true, mode: 0o700 });
    await rm(this.fileOf(deploymentId), { force: true });
  }

  append(deploymentId: string, line: string): void {
    appendFileSync(this.fileOf(deploymentId), `${line}\n`, { mode: 0o600 });
  }

  async remove(deploymentId: string): Promise<void> {
    await rm(this.fileOf(deploymentId), { force: true });
  }

  /** The complete lines from byte `offset` on, and the offset after the last of them. */
  async readFrom(deploymentId: string, offset = 0): Promise<{ lines: string[]; offset: number }> {
    let handle: Awaited<ReturnType<typeof open>>;
    try {
      handle = await open(this.fileOf(deploymentId), 'r');
    } catch {
      return { lines: [], offset };
    }
    try {
      const { size } = await handle.stat();
      if (size <= offset) return { lines: [], offset };
      const buffer = Buffer.alloc(size - offset);
      const { bytesRead } = await handle.read(buffer, 0, buffer.length, offset);
      const text = buffer.subarray(0, bytesRead).toString('utf8');
      // A line being written (no newline yet) is left for the next read.
      const end = text.lastIndexOf('\n');
      if (end === -1) return { lines: [], offset };
      return { lines: text.slice(0, end).split('\n'), offset: offset + Buffer.byteLength(text.slice(0, end + 1)) };
    } finally {
      await handle.close();
    }
  }
}

export interface FollowSource {
  files: BuildLogFiles;
  deploymentId: string;
  /** The deployment's stored log once it is finished, else null (still running). */
  finished(): Promise<string[] | null>;
  /** Time between looks at the file while nothing new came (production 250 ms). */
  pollMs: number;
  signal: AbortSignal;
}

/**
 * The log's lines as they come, from the first, until the deployment is finished: what the file
 * holds, then each new line; at the end whatever of the stored log was not sent yet (the last lines
 * written between two looks). Ends early when `signal` aborts (the client went away).
 */
export async function* followBuildLog(source: FollowSource): AsyncGenerator<string> {
  let offset = 0;
  let sent = 0;
  while (!source.signal.aborted) {
    const stored = await source.finished();
    if (stored) {
      yield* stored.slice(sent);
      return;
    }
    const next = await source.files.readFrom(source.deploymentId, offset);
    offset = next.offset;
    for (const line of next.lines) {
      sent++;
      yield line;
    }
    if (next.lines.length === 0) await pause(source.pollMs, source.signal);
  }
}

function pause(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(done, ms);
    signal.addEventListener('abort', done, { once: true });
    function done() {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    }
  });
}
