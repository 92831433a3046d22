import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type { StoreEpochRecord } from '../../core/ports/coordination.ts';
import type { RedisClient } from './redis-client.ts';
import type { RedisKeyNames } from './redis-key-names.ts';
import { EPOCH_ESTABLISH, EPOCH_READY, integerReply, runScript } from './redis-scripts.ts';

/** The store's current epoch, and the server time of the loss that began it (null: it began without one). */
export interface CurrentEpoch {
  epoch: string;
  lostAt: number | null;
}

/** While waiting for the live replicas' reports, look again this often (only after a loss). */
const READY_POLL_MS = 10;
/** Establishing an epoch that vanishes again at once this many times means the store keeps losing its data. */
const ESTABLISH_ROUNDS = 5;

/**
 * Tells a new Redis from one that lost its data, with the epoch the database remembers, and
 * establishes the store's epoch. The database is written first and the store second, and an epoch
 * counts as established only once both are: so a store without an epoch while the database
 * records an unestablished one holds nothing written under it (no replica admits under an epoch
 * before it is established), and replicas racing on a fresh deployment, even with the store
 * flushed between them, write the same epoch and wait for nothing.
 */
export class RedisStoreEpoch {
  constructor(
    private readonly client: RedisClient,
    private readonly names: RedisKeyNames,
    private readonly record: StoreEpochRecord,
  ) {}

  /** The store's epoch, established first if it has none (a new store, or one that lost its data). */
  async current(): Promise<CurrentEpoch> {
    for (let round = 0; round < ESTABLISH_ROUNDS; round += 1) {
      const [epoch, lost] = await this.client.mGet([this.names.epoch, this.names.epochLost]);
      if (epoch) return { epoch, lostAt: lost === null ? null : Number(lost) };
      await this.establish();
    }
    throw new Error('coordination store keeps losing its epoch: admission refused');
  }

  /** The store has no epoch (seen just now): establish the one the database records, beginning one if needed. */
  private async establish(): Promise<void> {
    let recorded = await this.record.read();
    if (recorded === null) {
      await this.record.begin(randomUUID());
      recorded = await this.record.read();
    } else if (recorded.established) {
      // Established, yet absent from the store: lost, unless a replica established it after we
      // looked. Its establishment is committed now, so the store either holds it or lost it.
      if ((await this.client.get(this.names.epoch)) !== null) return;
      await this.record.replace(recorded.epoch, randomUUID());
      recorded = await this.record.read();
    }
    if (recorded === null) throw new Error('coordination epoch: the database recorded none');
    if (recorded.established) return; // another replica finished first: look at the store again
    await runScript(this.client, EPOCH_ESTABLISH, [this.names.epoch, this.names.epochLost], [recorded.epoch, recorded.afterLoss ? '1' : '0']);
    await this.record.establish(recorded.epoch);
  }

  /**
   * After a loss: resolves once every live replica has reported what it holds for `epoch`, or the
   * recovery window since the loss has passed (a replica that cannot reach the store): `ready` at
   * the first look, `waited` after waiting; `moved` when the store moved to another epoch meanwhile
   * (it lost its data again).
   */
  async ready(epoch: string, windowMs: number, liveReplicas: readonly string[]): Promise<'ready' | 'waited' | 'moved'> {
    const keys = [this.names.epoch, this.names.epochLost, this.names.epochReported(epoch)];
    for (let looks = 0; ; looks += 1) {
      const [answer] = integerReply(await runScript(this.client, EPOCH_READY, keys, [epoch, String(windowMs), ...liveReplicas]), EPOCH_READY);
      if (answer === -1) return 'moved';
      if (answer === 1) return looks === 0 ? 'ready' : 'waited';
      await sleep(READY_POLL_MS);
    }
  }
}
