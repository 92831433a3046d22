import type { JobLogs } from '../../core/jobs/job-logs.ts';

/**
 * A running build's log is the kernel's running job log (core/jobs/job-logs.ts) under this stream:
 * the building worker writes each `<ISO time> <stream> <text>` line through it, and the API on any
 * replica reads and follows it while the deployment runs (`complete: false`). Once the deployment is
 * finished its log is the blob (deploy-pipeline.ts stores it before marking the deployment finished)
 * and the stream is discarded.
 */
export const buildLogStream = (deploymentId: string): string => `apps.build:${deploymentId}`;

export interface FollowSource {
  logs: JobLogs;
  deploymentId: string;
  /** Lines the caller has already (its snapshot): the first line followed is the one after them. */
  from: number;
  /** The deployment's stored log once it is finished, else null (still running). */
  finished(): Promise<string[] | null>;
  signal: AbortSignal;
}

/**
 * The log's lines as they come, from line `from` on, until the deployment is finished: the running
 * log's lines, then at the end whatever of the stored log was not sent yet (the last lines written
 * between two looks, or all of them when the deployment had finished before). Ends early when
 * `signal` aborts (the client went away).
 */
export async function* followBuildLog(source: FollowSource): AsyncGenerator<string> {
  let sent = source.from;
  const end: { stored: string[] | null } = { stored: null };
  const ended = async () => {
    end.stored = await source.finished();
    return end.stored !== null;
  };
  const { from, signal } = source;
  const lines = source.logs.follow(buildLogStream(source.deploymentId), { from, signal, ended });
  for await (const line of lines) {
    sent++;
    yield line;
  }
  if (source.signal.aborted) return;
  yield* (end.stored ?? (await source.finished()) ?? []).slice(sent);
}
