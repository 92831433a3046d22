import { randomUUID } from 'node:crypto';
import type { Database } from '../../core/ports/database.ts';
import type { RuntimeEvent } from './runtime/index.ts';

/**
 * Records every instance the runtime runs as a row of `app_instance_runs` (README.md: hosting money),
 * with times from the injected clock: a `started` opens a run, its `exited` closes it, so a crash and
 * its restart are two runs and the backoff between them costs nothing. Lives in the process that runs
 * the runtime. `heartbeat()` (every `hosting.heartbeatSeconds`) records that the open runs are alive;
 * when a host dies its runs stay open, charged up to their last heartbeat, and the next host closes
 * them there (`closeAbandoned()`, before it restores anything).
 */
export class HostingMeter {
  private writing: Promise<void> = Promise.resolve();
  private timer: NodeJS.Timeout | null = null;

  constructor(
    private readonly deps: {
      db: Database;
      clock: () => Date;
      heartbeatMs: number;
      error: (details: object, message: string) => void;
    },
  ) {}

  /** The runtime's listener: the event's time is when it is seen here; writes happen in order. */
  record(event: RuntimeEvent): void {
    if (event.kind !== 'started' && event.kind !== 'exited') return;
    const at = this.deps.clock();
    this.writing = this.writing.then(async () => {
      try {
        if (event.kind === 'started') await this.open(event, at);
        else await this.close(event.instance, at);
      } catch (error) {
        const err = error instanceof Error ? error.message : String(error);
        this.deps.error({ err, serviceId: event.serviceId, instance: event.instance }, 'apps hosting: recording an instance run failed');
      }
    });
  }

  /** Resolves once every event seen so far is written. */
  settled(): Promise<void> {
    return this.writing;
  }

  /** Records that every open run is alive now: what a run whose host dies is charged up to. */
  async heartbeat(): Promise<void> {
    await this.settled();
    await this.deps.db.query('UPDATE app_instance_runs SET seen_at = $1 WHERE stopped_at IS NULL', [this.deps.clock()]);
  }

  /**
   * At the runtime's start, before it restores anything: runs left open by a host that is gone end at
   * their last heartbeat (the instances died with it: bwrap's die-with-parent, or the restore's kill).
   */
  async closeAbandoned(): Promise<number> {
    await this.settled();
    const { rowCount } = await this.deps.db.query('UPDATE app_instance_runs SET stopped_at = seen_at WHERE stopped_at IS NULL');
    return rowCount;
  }

  startHeartbeat(): void {
    this.timer ??= setInterval(() => {
      this.heartbeat().catch((error: unknown) => this.deps.error({ err: error instanceof Error ? error.message : String(error) }, 'apps hosting: heartbeat failed'));
    }, this.deps.heartbeatMs);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    await this.settled();
  }

  private async open(event: Extract<RuntimeEvent, { kind: 'started' }>, at: Date): Promise<void> {
    // The service names the organisation; an instance of a service this database does not hold is not metered.
    await this.deps.db.query(
      `INSERT INTO app_instance_runs (id, organization_id, service_id, deployment_id, instance, memory_bytes, started_at, seen_at)
       SELECT $1, s.organization_id, s.id, $3, $4, $5, $6, $6 FROM app_services s WHERE s.id = $2
       ON CONFLICT (instance) WHERE stopped_at IS NULL DO NOTHING`,
      [randomUUID(), event.serviceId, event.deploymentId, event.instance, event.memoryBytes, at],
    );
  }

  private async close(instance: string, at: Date): Promise<void> {
    await this.deps.db.query('UPDATE app_instance_runs SET stopped_at = greatest($2, started_at), seen_at = greatest($2, seen_at) WHERE instance = $1 AND stopped_at IS NULL', [
      instance,
      at,
    ]);
  }
}
