import type { DomainEvents } from '../../core/events/domain-events.ts';
import type { Database } from '../../core/ports/database.ts';
import type { CreditCharges, LedgerLine } from '../../core/ports/metering.ts';
import { bigintOf, date, type Row } from '../../adapters/sql/rows.ts';
import type { HostingPrices } from './hosting-prices.ts';
import './hosting-events.ts';

const DAY_MS = 86_400_000;

/** One instance run's share of one UTC day: what a `hosting` line covers, one entry each. */
export interface HostingEntry {
  runId: string;
  serviceId: string;
  deploymentId: string;
  /** The run's start and end clipped to the day; an open run ends at its last heartbeat. */
  from: Date;
  to: Date;
  ms: number;
  tier: string;
  costMicros: bigint;
}

export interface HostingDay {
  organizationId: string;
  day: string;
  entries: HostingEntry[];
  /** The sum of the entries' costs: the `hosting` line's amount, negated. */
  hostingMicros: bigint;
  /** The day's base fee: zero on a day without an entry. */
  baseFeeMicros: bigint;
}

export interface HostingBillingSettings {
  baseFeeMicrosPerDay: bigint;
  closeDelayMs: number;
  graceMs: number;
}

/** Stops a service as POST /services/{id}/stop does (AppsHost.stopService). */
export type StopService = (serviceId: string) => Promise<void>;

const dayStart = (day: string) => new Date(`${day}T00:00:00.000Z`);
const nextDay = (day: string) => new Date(dayStart(day).getTime() + DAY_MS).toISOString().slice(0, 10);

/**
 * Hosting money (README.md: hosting money). `closeDue` charges each organisation, per UTC day that
 * ended `closeDelayMs` ago, one `hosting` line (the day's entries, `coversUtcDay`, `coversEntries`)
 * and one `hosting_base_fee` line, with the day's `app_hosting_days` row in their transaction: a
 * replayed or concurrent close posts nothing more (the row's key and the lines' references).
 * `enforceBalances` warns an organisation whose apps run at a balance of zero or less, and stops
 * them once the grace has passed.
 */
export class HostingBilling {
  constructor(
    private readonly deps: {
      db: Database;
      charges: CreditCharges;
      events: DomainEvents;
      prices: HostingPrices;
      clock: () => Date;
      stopService: StopService;
      settings: HostingBillingSettings;
    },
  ) {}

  /** What a day of an organisation costs, from its runs as they are now (the same figures every time once the day is closable). */
  async day(organizationId: string, day: string): Promise<HostingDay> {
    const from = dayStart(day);
    const to = dayStart(nextDay(day));
    const { rows } = await this.deps.db.query(
      `SELECT id, service_id, deployment_id, memory_bytes,
              greatest(started_at, $2::timestamptz) AS clipped_from,
              least(coalesce(stopped_at, seen_at), $3::timestamptz) AS clipped_to
       FROM app_instance_runs
       WHERE organization_id = $1 AND started_at < $3 AND coalesce(stopped_at, seen_at) > $2
       ORDER BY started_at, id`,
      [organizationId, from, to],
    );
    const entries = rows.map((row) => this.entryOf(row));
    const hostingMicros = entries.reduce((sum, entry) => sum + entry.costMicros, 0n);
    const baseFeeMicros = entries.length > 0 ? this.deps.settings.baseFeeMicrosPerDay : 0n;
    return { organizationId, day, entries, hostingMicros, baseFeeMicros };
  }

  /**
   * Charges one organisation's day: both lines and the day's row in one transaction. Answers the
   * lines written (none when the day was charged before, or had no entry).
   */
  async closeDay(organizationId: string, day: string): Promise<LedgerLine[]> {
    const figures = await this.day(organizationId, day);
    const count = figures.entries.length;
    const lines =
      count === 0
        ? []
        : [
            {
              kind: 'hosting' as const,
              amountMicros: -figures.hostingMicros,
              note: `App hosting on ${day}: ${count} instance run${count === 1 ? '' : 's'}, ${instanceHours(figures.entries)} instance-hours`,
              reference: `hosting:${day}`,
              coversUtcDay: day,
              coversEntries: count,
            },
            ...(figures.baseFeeMicros > 0n
              ? [
                  {
                    kind: 'hosting_base_fee' as const,
                    amountMicros: -figures.baseFeeMicros,
                    note: `App hosting base fee for ${day}`,
                    reference: `hosting-base-fee:${day}`,
                    coversUtcDay: day,
                  },
                ]
              : []),
          ];
    let first = true;
    const written = await this.deps.charges.charge(organizationId, lines, async (tx) => {
      const inserted = await tx.query(
        `INSERT INTO app_hosting_days (organization_id, day, entries, hosting_micros, base_fee_micros, closed_at)
         VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT DO NOTHING`,
        [organizationId, day, count, figures.hostingMicros, figures.baseFeeMicros, this.deps.clock()],
      );
      first = inserted.rowCount > 0;
    });
    if (!first && written.some((line) => line !== null)) {
      // Not reachable while the lines' references and the day's row are written together; said loudly if it ever is.
      throw new Error(`hosting day ${day} of ${organizationId} was charged again`);
    }
    return written.filter((line): line is LedgerLine => line !== null);
  }

  /** The (organisation, day) pairs with runs, ended `closeDelayMs` before now and not yet charged, oldest first. */
  async dueDays(now: Date): Promise<Array<{ organizationId: string; day: string }>> {
    const before = new Date(now.getTime() - this.deps.settings.closeDelayMs);
    const { rows } = await this.deps.db.query<{ organization_id: string; day: string }>(
      `SELECT DISTINCT r.organization_id, d.day::date::text AS day
       FROM app_instance_runs r
       CROSS JOIN LATERAL generate_series(
         date_trunc('day', r.started_at AT TIME ZONE 'UTC'),
         date_trunc('day', coalesce(r.stopped_at, r.seen_at) AT TIME ZONE 'UTC'),
         interval '1 day') AS d(day)
       WHERE d.day + interval '1 day' <= ($1::timestamptz AT TIME ZONE 'UTC')
         AND NOT EXISTS (SELECT 1 FROM app_hosting_days h WHERE h.organization_id = r.organization_id AND h.day = d.day::date)
       ORDER BY day, r.organization_id`,
      [before],
    );
    return rows.map((row) => ({ organizationId: row.organization_id, day: row.day }));
  }

  /**
   * Charges every due day (the periodic job); answers how many lines were written. One day that fails
   * holds back no other: the failures are thrown together at the end, and the next run tries them again.
   */
  async closeDue(): Promise<number> {
    let written = 0;
    const failures: unknown[] = [];
    for (const { organizationId, day } of await this.dueDays(this.deps.clock())) {
      try {
        written += (await this.closeDay(organizationId, day)).length;
      } catch (error) {
        failures.push(error);
      }
    }
    if (failures.length > 0) throw new AggregateError(failures, `charging ${failures.length} hosting day(s) failed`);
    return written;
  }

  /**
   * The zero-balance rule (README.md): an organisation with running services and a balance of zero or
   * less is warned once (`hosting.balance_exhausted`, mailed to its owners) and, once `graceMs` has
   * passed with the balance still there, its running services are stopped (`hosting.services_stopped`).
   * A service started again while the balance is still at zero is stopped at the next check, without
   * a new grace. A balance above zero clears the notice; stopped services stay stopped.
   */
  async enforceBalances(): Promise<{ warned: string[]; stopped: string[] }> {
    const now = this.deps.clock();
    const warned: string[] = [];
    const stopped: string[] = [];
    const { rows } = await this.deps.db.query<{ organization_id: string; running: string[] | null; notice: boolean }>(
      `SELECT o.organization_id, array_agg(s.id::text ORDER BY s.id) FILTER (WHERE s.id IS NOT NULL) AS running, bool_or(n.organization_id IS NOT NULL) AS notice
       FROM (SELECT organization_id FROM app_services WHERE desired = 'running'
             UNION SELECT organization_id FROM app_balance_notices) o
       LEFT JOIN app_services s ON s.organization_id = o.organization_id AND s.desired = 'running'
       LEFT JOIN app_balance_notices n ON n.organization_id = o.organization_id
       GROUP BY o.organization_id`,
    );
    const failures: unknown[] = [];
    for (const row of rows) {
      try {
        await this.enforce(row, now, warned, stopped);
      } catch (error) {
        failures.push(error);
      }
    }
    if (failures.length > 0) throw new AggregateError(failures, `acting on ${failures.length} zero balance(s) failed`);
    return { warned, stopped };
  }

  /** One organisation of enforceBalances. */
  private async enforce(row: { organization_id: string; running: string[] | null; notice: boolean }, now: Date, warned: string[], stopped: string[]): Promise<void> {
    const organizationId = row.organization_id;
    const running = (row.running ?? []).map(String);
    const balance = await this.deps.charges.balance(organizationId);
    if (balance === null || balance > 0n) {
      if (row.notice) await this.deps.db.query('DELETE FROM app_balance_notices WHERE organization_id = $1', [organizationId]);
      return;
    }
    if (running.length === 0) return;
    const notice = await this.notice(organizationId);
    if (!notice) {
      const graceEndsAt = new Date(now.getTime() + this.deps.settings.graceMs);
      await this.deps.db.transaction(async (tx) => {
        const inserted = await tx.query(
          `INSERT INTO app_balance_notices (organization_id, balance_micros, warned_at, grace_ends_at) VALUES ($1, $2, $3, $4)
             ON CONFLICT DO NOTHING`,
          [organizationId, balance, now, graceEndsAt],
        );
        if (inserted.rowCount === 0) return;
        await this.deps.events.emit(tx, {
          type: 'hosting.balance_exhausted',
          organizationId,
          subject: null,
          actor: null,
          data: { balanceMicros: String(balance), runningServices: running.length, graceEndsAt: graceEndsAt.toISOString() },
        });
        warned.push(organizationId);
      });
      return;
    }
    if (now < notice.graceEndsAt) return;
    for (const serviceId of running) await this.deps.stopService(serviceId);
    await this.deps.db.transaction(async (tx) => {
      await tx.query('UPDATE app_balance_notices SET stopped_at = $2 WHERE organization_id = $1', [organizationId, now]);
      await this.deps.events.emit(tx, {
        type: 'hosting.services_stopped',
        organizationId,
        subject: null,
        actor: null,
        data: { balanceMicros: String(balance), serviceIds: running },
      });
    });
    stopped.push(organizationId);
  }

  /** The periodic job's run: charge what is due, then act on balances (which the charges may have moved). */
  async tick(): Promise<void> {
    const charged = await this.closeDue().then(
      () => null,
      (error: unknown) => error,
    );
    await this.enforceBalances();
    if (charged) throw charged;
  }

  private async notice(organizationId: string): Promise<{ graceEndsAt: Date } | null> {
    const { rows } = await this.deps.db.query('SELECT grace_ends_at FROM app_balance_notices WHERE organization_id = $1', [organizationId]);
    return rows[0] ? { graceEndsAt: date(rows[0], 'grace_ends_at') } : null;
  }

  private entryOf(row: Row): HostingEntry {
    const from = date(row, 'clipped_from');
    const to = date(row, 'clipped_to');
    const ms = Math.max(0, to.getTime() - from.getTime());
    const tier = this.deps.prices.tierOf(Number(bigintOf(row, 'memory_bytes')));
    return {
      runId: String(row['id']),
      serviceId: String(row['service_id']),
      deploymentId: String(row['deployment_id']),
      from,
      to,
      ms,
      tier: tier.name,
      costMicros: this.deps.prices.costMicros(tier, ms),
    };
  }
}

/** The entries' time in hours, to two decimals: the line's note. */
function instanceHours(entries: readonly HostingEntry[]): string {
  const ms = entries.reduce((sum, entry) => sum + entry.ms, 0);
  return (ms / 3_600_000).toFixed(2);
}
