import type { RecordedEpoch, StoreEpochRecord } from '../../core/ports/coordination.ts';
import type { Queryable } from '../../core/ports/database.ts';

/**
 * The coordination store's epoch and its replicas in the database (core-coordination migration 1),
 * one row per store: the store is named by its key prefix, so deployments sharing one Redis keep
 * apart. Every change is a single statement whose condition decides races between replicas.
 */
export class SqlCoordinationEpochs implements StoreEpochRecord {
  constructor(
    private readonly db: Queryable,
    private readonly store: string,
  ) {}

  async read(): Promise<RecordedEpoch | null> {
    const { rows } = await this.db.query<{ epoch: string; established: boolean; after_loss: boolean }>('SELECT epoch, established, after_loss FROM coordination_epochs WHERE store = $1', [
      this.store,
    ]);
    const row = rows[0];
    return row ? { epoch: row.epoch, established: row.established, afterLoss: row.after_loss } : null;
  }

  async begin(epoch: string): Promise<void> {
    await this.db.query('INSERT INTO coordination_epochs (store, epoch, after_loss) VALUES ($1, $2, false) ON CONFLICT (store) DO NOTHING', [this.store, epoch]);
  }

  async replace(lost: string, next: string): Promise<void> {
    await this.db.query(
      `UPDATE coordination_epochs SET epoch = $3, established = false, after_loss = true, updated_at = now()
       WHERE store = $1 AND epoch = $2 AND established`,
      [this.store, lost, next],
    );
  }

  async establish(epoch: string): Promise<void> {
    await this.db.query('UPDATE coordination_epochs SET established = true, updated_at = now() WHERE store = $1 AND epoch = $2 AND NOT established', [this.store, epoch]);
  }

  async heartbeat(replica: string): Promise<void> {
    await this.db.query(
      `INSERT INTO coordination_replicas (store, replica) VALUES ($1, $2)
       ON CONFLICT (store, replica) DO UPDATE SET seen_at = now()`,
      [this.store, replica],
    );
  }

  async liveReplicas(withinMs: number): Promise<string[]> {
    // Replicas that died without closing leave a row each; asked only after a loss, this is where they go.
    await this.db.query(`DELETE FROM coordination_replicas WHERE store = $1 AND seen_at < now() - interval '1 day'`, [this.store]);
    const { rows } = await this.db.query<{ replica: string }>(`SELECT replica FROM coordination_replicas WHERE store = $1 AND seen_at > now() - make_interval(secs => $2::float8 / 1000)`, [
      this.store,
      withinMs,
    ]);
    return rows.map((row) => row.replica);
  }

  async forget(replica: string): Promise<void> {
    await this.db.query('DELETE FROM coordination_replicas WHERE store = $1 AND replica = $2', [this.store, replica]);
  }
}
