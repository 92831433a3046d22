import type { Queryable } from './database.ts';

/**
 * Storage of a running job's log lines (implemented once in adapters/sql/job-log-store.ts): the
 * place a worker writes what a long job prints and any API replica reads it from while it runs.
 * A log is named by its stream (`apps.build:<deploymentId>`), belongs to an organisation (erased
 * with it), and is a sequence of lines numbered from 0, stored as ordered chunks. What a job keeps
 * once it has finished is its own (a blob): these rows are for the time it runs. Split by who uses
 * it, as queue.ts is: workers write, the API reads.
 */
export interface JobLogChunk {
  stream: string;
  organizationId: string;
  /** The number of the chunk's first line: the lines written before it in this stream. */
  firstLine: number;
  lines: readonly string[];
  /** From the caller's clock. */
  writtenAt: Date;
}

/** What workers use: add the next chunk, start the stream afresh, forget it. */
export interface JobLogWriterStore {
  /** Stores a chunk; a chunk already stored at the same first line is replaced (a retried write). */
  append(chunk: JobLogChunk): Promise<void>;
  /** Deletes the stream's lines; how many chunks went. */
  clear(stream: string): Promise<number>;
}

/** What the API uses: the lines from a line number on. */
export interface JobLogReaderStore {
  /**
   * Up to `maxLines` lines from line `from` on, in order; fewer (or none) when no more are stored
   * yet. A stream never written, or cleared, has none.
   */
  read(stream: string, from: number, maxLines: number): Promise<string[]>;
}

/** What an organisation's deletion uses: every stream of the organisation, inside its transaction. */
export interface JobLogErasure {
  eraseForOrganization(db: Queryable, organizationId: string): Promise<number>;
}

export type JobLogStore = JobLogWriterStore & JobLogReaderStore & JobLogErasure;
