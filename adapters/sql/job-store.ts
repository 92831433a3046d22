import type { Database, Queryable, QueryResult } from '../../core/ports/database.ts';
import type { ClaimRequest, ClaimedJob, HeartbeatAnswer, JobLease, JobLeaseStore, JobOutcome, JobQueueStore, JobRecord, JobState, NewJob, PeriodicStore } from '../../core/ports/queue.ts';
import { bool, date, dateOrNull, str, strOrNull, type Row } from './rows.ts';

const JOB_COLUMNS = `id, queue, payload, state, attempts, max_attempts, priority, run_at, idempotency_key, last_error, cancel_requested, created_at, finished_at`;

/** JOB_COLUMNS, each qualified by a table (or CTE) name. */
const columnsOf = (table: string): string =>
  JOB_COLUMNS.split(', ')
    .map((column) => `${table}.${column}`)
    .join(', ');

const LEASE_EXPIRED = 'the worker running it stopped renewing its lease (it crashed, or lost the database)';

function toJob(row: Row): JobRecord {
  return {
    id: String(row['id']),
    queue: str(row, 'queue'),
    payload: row['payload'],
    state: str(row, 'state') as JobState,
    attempts: Number(row['attempts']),
    maxAttempts: Number(row['max_attempts']),
    priority: Number(row['priority']),
    runAt: date(row, 'run_at'),
    idempotencyKey: strOrNull(row, 'idempotency_key'),
    lastError: strOrNull(row, 'last_error'),
    cancelRequested: bool(row, 'cancel_requested'),
    createdAt: date(row, 'created_at'),
    finishedAt: dateOrNull(row, 'finished_at'),
  };
}

const jobParams = (job: NewJob): unknown[] => [job.queue, JSON.stringify(job.payload), job.priority, job.runAt, job.maxAttempts, job.idempotencyKey, job.createdAt];

/**
 * Inserts a job; with an idempotency key already taken in that queue, returns the job holding it.
 * ON CONFLICT waits for a concurrent transaction inserting the same key, so the key's first job
 * wins whichever transaction commits first.
 */
async function insertJob(db: Queryable, job: NewJob): Promise<{ job: JobRecord; created: boolean }> {
  const inserted = await db.query(
    `INSERT INTO jobs (queue, payload, priority, run_at, max_attempts, idempotency_key, created_at)
     VALUES ($1, $2::jsonb, $3, $4, $5, $6, $7)
     ON CONFLICT (queue, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
     RETURNING ${JOB_COLUMNS}`,
    jobParams(job),
  );
  if (inserted.rows[0]) return { job: toJob(inserted.rows[0]), created: true };
  const existing = await db.query(`SELECT ${JOB_COLUMNS} FROM jobs WHERE queue = $1 AND idempotency_key = $2`, [job.queue, job.idempotencyKey]);
  if (!existing.rows[0]) throw new Error(`job with idempotency key ${job.idempotencyKey} in ${job.queue} vanished while it was being enqueued`);
  return { job: toJob(existing.rows[0]), created: false };
}

/**
 * Items per INSERT in enqueueMany. The whole chunk travels as one jsonb parameter (PostgreSQL's
 * limit of 65,535 parameters never applies), so the size only bounds one statement's memory.
 */
export const ENQUEUE_CHUNK = 1_000;

/**
 * One chunk of enqueueMany in one statement. Each item takes its id from the jobs sequence first,
 * in item order, so every item is matched to its row by id (RETURNING promises no order) and ids
 * ascend in item order (claims break ties by id). An item whose key is taken, earlier in the list
 * or by an existing job, comes back without a row; its job is then looked up by key.
 */
async function insertJobs(db: Queryable, jobs: readonly NewJob[]): Promise<Array<{ job: JobRecord; created: boolean }>> {
  const items = jobs.map((job) => ({
    queue: job.queue,
    payload: job.payload,
    priority: job.priority,
    run_at: job.runAt.toISOString(),
    max_attempts: job.maxAttempts,
    idempotency_key: job.idempotencyKey,
    created_at: job.createdAt.toISOString(),
  }));
  const { rows } = await db.query(
    `WITH input AS (
       SELECT nextval(pg_get_serial_sequence('jobs', 'id')) AS id, e.ord,
              e.item->>'queue' AS queue, e.item->'payload' AS payload, (e.item->>'priority')::integer AS priority,
              (e.item->>'run_at')::timestamptz AS run_at, (e.item->>'max_attempts')::integer AS max_attempts,
              e.item->>'idempotency_key' AS idempotency_key, (e.item->>'created_at')::timestamptz AS created_at
       FROM jsonb_array_elements($1::jsonb) WITH ORDINALITY AS e(item, ord)
       ORDER BY e.ord
     ), inserted AS (
       INSERT INTO jobs (id, queue, payload, priority, run_at, max_attempts, idempotency_key, created_at)
       SELECT id, queue, payload, priority, run_at, max_attempts, idempotency_key, created_at FROM input ORDER BY ord
       ON CONFLICT (queue, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
       RETURNING ${JOB_COLUMNS}
     )
     SELECT ${columnsOf('inserted')} FROM input LEFT JOIN inserted ON inserted.id = input.id ORDER BY input.ord`,
    [JSON.stringify(items)],
  );
  const answers: Array<{ job: JobRecord; created: boolean } | null> = rows.map((row) => (row['id'] === null ? null : { job: toJob(row), created: true }));
  const taken = jobs.filter((_, i) => answers[i] === null).map((job) => ({ queue: job.queue, key: job.idempotencyKey }));
  if (taken.length > 0) {
    const existing = await db.query(
      `SELECT ${columnsOf('jobs')} FROM jobs
       JOIN jsonb_array_elements($1::jsonb) AS k(item) ON jobs.queue = k.item->>'queue' AND jobs.idempotency_key = k.item->>'key'`,
      [JSON.stringify(taken)],
    );
    const byKey = new Map(existing.rows.map((row) => [JSON.stringify([str(row, 'queue'), str(row, 'idempotency_key')]), toJob(row)]));
    answers.forEach((answer, i) => {
      if (answer !== null) return;
      const { queue, idempotencyKey } = jobs[i]!;
      const job = byKey.get(JSON.stringify([queue, idempotencyKey]));
      if (!job) throw new Error(`job with idempotency key ${idempotencyKey} in ${queue} vanished while it was being enqueued`);
      answers[i] = { job, created: false };
    });
  }
  return answers as Array<{ job: JobRecord; created: boolean }>;
}

/** The queue's storage on the SQL port: one implementation for PostgreSQL and PGlite. */
export class SqlJobStore implements JobQueueStore, JobLeaseStore {
  constructor(private readonly db: Database) {}

  enqueue(db: Queryable, job: NewJob): Promise<{ job: JobRecord; created: boolean }> {
    return insertJob(db, job);
  }

  async enqueueMany(db: Queryable, jobs: readonly NewJob[]): Promise<Array<{ job: JobRecord; created: boolean }>> {
    const answers: Array<{ job: JobRecord; created: boolean }> = [];
    for (let start = 0; start < jobs.length; start += ENQUEUE_CHUNK) answers.push(...(await insertJobs(db, jobs.slice(start, start + ENQUEUE_CHUNK))));
    return answers;
  }

  async get(id: string): Promise<JobRecord | null> {
    if (!/^[0-9]{1,18}$/.test(id)) return null;
    const { rows } = await this.db.query(`SELECT ${JOB_COLUMNS} FROM jobs WHERE id = $1`, [id]);
    return rows[0] ? toJob(rows[0]) : null;
  }

  async cancel(id: string, now: Date): Promise<'cancelled' | 'cancel_requested' | null> {
    if (!/^[0-9]{1,18}$/.test(id)) return null;
    // SET expressions read the row as it was, so `state` on the right is the state before.
    const { rows } = await this.db.query<{ state: JobState }>(
      `UPDATE jobs SET
         state = CASE WHEN state = 'queued' THEN 'cancelled' ELSE state END,
         cancel_requested = (state = 'running'),
         finished_at = CASE WHEN state = 'queued' THEN $2 ELSE finished_at END
       WHERE id = $1 AND state IN ('queued', 'running')
       RETURNING state`,
      [id, now],
    );
    const state = rows[0]?.state;
    return state === undefined ? null : state === 'cancelled' ? 'cancelled' : 'cancel_requested';
  }

  /**
   * One statement for every queue with free slots: per queue, the due jobs in priority order,
   * skipping rows another worker has locked, each taken with a fresh lease token. Two workers can
   * never take the same job: the row lock is held until this statement's transaction commits, and
   * by then the row is no longer queued.
   */
  async claim(requests: readonly ClaimRequest[], now: Date, workerId: string): Promise<ClaimedJob[]> {
    const wanted = requests.filter((r) => r.slots > 0);
    if (wanted.length === 0) return [];
    const { rows } = await this.db.query(
      `WITH wanted AS (
         SELECT * FROM unnest($1::text[], $2::int[], $3::bigint[]) AS w(queue, slots, lease_ms)
       ), picked AS (
         SELECT j.id, w.lease_ms FROM wanted w CROSS JOIN LATERAL (
           SELECT id FROM jobs
           WHERE jobs.queue = w.queue AND state = 'queued' AND run_at <= $4
           ORDER BY priority DESC, run_at, id
           LIMIT w.slots
           FOR UPDATE SKIP LOCKED
         ) j
       )
       UPDATE jobs SET
         state = 'running',
         attempts = jobs.attempts + 1,
         lease_token = gen_random_uuid(),
         locked_until = $4::timestamptz + picked.lease_ms * interval '1 millisecond',
         locked_by = $5,
         started_at = $4
       FROM picked WHERE jobs.id = picked.id
       RETURNING jobs.id, jobs.queue, jobs.payload, jobs.attempts, jobs.max_attempts, jobs.lease_token`,
      [wanted.map((r) => r.queue), wanted.map((r) => r.slots), wanted.map((r) => r.leaseMs), now, workerId],
    );
    return rows.map((row) => ({
      id: String(row['id']),
      token: str(row, 'lease_token'),
      queue: str(row, 'queue'),
      payload: row['payload'],
      attempt: Number(row['attempts']),
      maxAttempts: Number(row['max_attempts']),
    }));
  }

  async heartbeat(lease: JobLease, lockedUntil: Date): Promise<HeartbeatAnswer> {
    const { rows } = await this.db.query<{ cancel_requested: boolean }>(
      `UPDATE jobs SET locked_until = $3 WHERE id = $1 AND lease_token = $2 AND state = 'running' RETURNING cancel_requested`,
      [lease.id, lease.token, lockedUntil],
    );
    if (!rows[0]) return 'lost';
    return rows[0].cancel_requested ? 'cancel_requested' : 'held';
  }

  async finish(lease: JobLease, outcome: JobOutcome, now: Date, db: Queryable = this.db): Promise<boolean> {
    const fence = `WHERE id = $1 AND lease_token = $2 AND state = 'running'`;
    const release = `lease_token = NULL, locked_until = NULL, locked_by = NULL`;
    const key = [lease.id, lease.token];
    const requeued = `CASE WHEN cancel_requested THEN 'cancelled' ELSE 'queued' END`;
    const finishedIfCancelled = `CASE WHEN cancel_requested THEN $4::timestamptz END`;
    let result: QueryResult<Record<string, unknown>>;
    switch (outcome.state) {
      case 'succeeded':
        result = await db.query(`UPDATE jobs SET state = 'succeeded', finished_at = $3, ${release} ${fence}`, [...key, now]);
        break;
      case 'failed':
        result = await db.query(`UPDATE jobs SET state = 'failed', finished_at = $3, last_error = $4, ${release} ${fence}`, [...key, now, outcome.error]);
        break;
      case 'cancelled':
        result = await db.query(`UPDATE jobs SET state = 'cancelled', finished_at = $3, last_error = coalesce($4, last_error), ${release} ${fence}`, [...key, now, outcome.error]);
        break;
      // A job someone asked to cancel while it ran is not queued again.
      case 'retry':
        result = await db.query(`UPDATE jobs SET state = ${requeued}, finished_at = ${finishedIfCancelled}, run_at = $3, last_error = $5, ${release} ${fence}`, [
          ...key,
          outcome.runAt,
          now,
          outcome.error,
        ]);
        break;
      case 'released':
        result = await db.query(`UPDATE jobs SET state = ${requeued}, finished_at = ${finishedIfCancelled}, run_at = $3, attempts = attempts - 1, ${release} ${fence}`, [...key, now, now]);
        break;
      // Like a release, at the time the handler chose: the attempt does not count, lastError stays.
      case 'snoozed':
        result = await db.query(`UPDATE jobs SET state = ${requeued}, finished_at = ${finishedIfCancelled}, run_at = $3, attempts = attempts - 1, ${release} ${fence}`, [
          ...key,
          outcome.runAt,
          now,
        ]);
        break;
    }
    return result.rowCount > 0;
  }

  async recoverExpired(now: Date): Promise<number> {
    const { rowCount } = await this.db.query(
      `UPDATE jobs SET
         state = CASE WHEN cancel_requested THEN 'cancelled' WHEN attempts >= max_attempts THEN 'failed' ELSE 'queued' END,
         finished_at = CASE WHEN cancel_requested OR attempts >= max_attempts THEN $1 END,
         run_at = $1,
         last_error = $2,
         lease_token = NULL, locked_until = NULL, locked_by = NULL
       WHERE state = 'running' AND locked_until <= $1`,
      [now, LEASE_EXPIRED],
    );
    return rowCount;
  }

  async pruneFinished(before: Date): Promise<number> {
    const { rowCount } = await this.db.query('DELETE FROM jobs WHERE finished_at < $1', [before]);
    return rowCount;
  }
}

/** Periodic jobs on the SQL port: PostgreSQL's row lock on periodic_jobs decides which replica runs a tick. */
export class SqlPeriodicStore implements PeriodicStore {
  constructor(private readonly db: Database) {}

  async register(jobs: ReadonlyArray<{ name: string; intervalMs: number }>, now: Date): Promise<void> {
    if (jobs.length === 0) return;
    // A changed interval takes effect at the sooner of the old next run and one new interval from now.
    await this.db.query(
      `INSERT INTO periodic_jobs (name, interval_ms, next_run_at)
       SELECT name, interval_ms, $3 FROM unnest($1::text[], $2::bigint[]) AS p(name, interval_ms)
       ON CONFLICT (name) DO UPDATE SET
         interval_ms = EXCLUDED.interval_ms,
         next_run_at = CASE WHEN periodic_jobs.interval_ms = EXCLUDED.interval_ms THEN periodic_jobs.next_run_at
                            ELSE LEAST(periodic_jobs.next_run_at, $3::timestamptz + EXCLUDED.interval_ms * interval '1 millisecond') END`,
      [jobs.map((j) => j.name), jobs.map((j) => j.intervalMs), now],
    );
  }

  /**
   * Under READ COMMITTED, a second replica's UPDATE of the same row waits for the first one's
   * commit, then re-checks `next_run_at <= now` against the moved value and skips the row: one
   * replica per tick. The next run stays on the job's cadence (missed ticks are skipped, not
   * replayed).
   */
  async claimDue(jobs: ReadonlyArray<{ name: string; queue: string; maxAttempts: number }>, now: Date, workerId: string): Promise<string[]> {
    if (jobs.length === 0) return [];
    const byName = new Map(jobs.map((j) => [j.name, j]));
    return this.db.transaction(async (tx) => {
      const { rows } = await tx.query<{ name: string }>(
        `UPDATE periodic_jobs SET
           next_run_at = next_run_at + (interval_ms * (floor(extract(epoch FROM ($2::timestamptz - next_run_at)) * 1000 / interval_ms) + 1))::float8 * interval '1 millisecond',
           last_run_at = $2,
           last_run_by = $3
         WHERE name = ANY($1::text[]) AND next_run_at <= $2
         RETURNING name`,
        [jobs.map((j) => j.name), now, workerId],
      );
      const claimed: string[] = [];
      for (const { name } of rows) {
        const job = byName.get(name)!;
        // A tick whose previous run is still queued or running is skipped: runs never pile up. (Two
        // NOT EXISTS, so each matches one of the partial indexes on queued and on running jobs.)
        const { rowCount } = await tx.query(
          `INSERT INTO jobs (queue, payload, priority, run_at, max_attempts, created_at)
           SELECT $1, '{}'::jsonb, 0, $2, $3, $2
           WHERE NOT EXISTS (SELECT 1 FROM jobs WHERE queue = $1 AND state = 'queued')
             AND NOT EXISTS (SELECT 1 FROM jobs WHERE queue = $1 AND state = 'running')`,
          [job.queue, now, job.maxAttempts],
        );
        if (rowCount > 0) claimed.push(name);
      }
      return claimed;
    });
  }
}
