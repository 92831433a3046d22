import type { Database, Queryable } from '../../core/ports/database.ts';
import type { JobLogChunk, JobLogStore } from '../../core/ports/job-logs.ts';

/** Running jobs' log lines on the SQL port: one implementation for PostgreSQL and PGlite. */
export class SqlJobLogStore implements JobLogStore {
  constructor(private readonly db: Database) {}

  async append(chunk: JobLogChunk): Promise<void> {
    if (chunk.lines.length === 0) return;
    await this.db.query(
      `INSERT INTO job_log_chunks (stream, first_line, organization_id, lines, written_at)
       VALUES ($1, $2, $3, $4::text[], $5)
       ON CONFLICT (stream, first_line) DO UPDATE SET lines = EXCLUDED.lines, written_at = EXCLUDED.written_at`,
      [chunk.stream, chunk.firstLine, chunk.organizationId, [...chunk.lines], chunk.writtenAt],
    );
  }

  async clear(stream: string): Promise<number> {
    const { rowCount } = await this.db.query('DELETE FROM job_log_chunks WHERE stream = $1', [stream]);
    return rowCount;
  }

  async read(stream: string, from: number, maxLines: number): Promise<string[]> {
    if (maxLines <= 0) return [];
    // From the chunk holding line `from` (the last one starting at or before it) to the one holding
    // the last line wanted: the primary key's order, no scan of the stream's earlier chunks.
    const { rows } = await this.db.query<{ first_line: number; lines: string[] }>(
      `SELECT first_line, lines FROM job_log_chunks
       WHERE stream = $1
         AND first_line >= coalesce(
           (SELECT max(first_line) FROM job_log_chunks WHERE stream = $1 AND first_line <= $2), 0)
         AND first_line < $2 + $3
       ORDER BY first_line`,
      [stream, from, maxLines],
    );
    const lines: string[] = [];
    let next = from;
    for (const row of rows) {
      const first = Number(row.first_line);
      // A chunk not written yet (or a stream begun afresh under the reader) leaves a gap: stop there.
      if (first > next || first + row.lines.length <= next) break;
      for (const line of row.lines.slice(next - first)) {
        if (lines.length === maxLines) return lines;
        lines.push(line);
      }
      next = from + lines.length;
    }
    return lines;
  }

  async eraseForOrganization(db: Queryable, organizationId: string): Promise<number> {
    const { rowCount } = await db.query('DELETE FROM job_log_chunks WHERE organization_id = $1', [organizationId]);
    return rowCount;
  }
}
