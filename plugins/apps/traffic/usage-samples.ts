import type { OrganizationEraser } from '../../../core/kernel/organization-erasure.ts';
import type { Migration, Queryable } from '../../../core/ports/database.ts';
import type { InstanceUsage } from '../runtime/index.ts';

/**
 * Usage samples: what each running instance used, read from the runtime every
 * `usage.sampleEveryMs` (the periodic job `apps.usage-sample`) and kept `usage.retentionDays`.
 * A sample taken at `sampled_at` accounts for the instance's running time since its previous
 * sample (or its start): `covers_ms`, the instance-time hosting is priced by (hosting-price.ts),
 * and `cpu_ms`, the CPU time it used meanwhile. A sample belongs to the UTC hour and day of
 * `sampled_at` (the usage series and the daily `hosting` ledger lines both count it there).
 */
export const usageMigrations: Migration[] = [
  {
    owner: 'apps-traffic',
    version: 1,
    name: 'app_usage_samples; app_requests by app and time',
    sql: `
-- An app's analytics and usage read its proxied requests by app and time.
CREATE INDEX app_requests_app_time ON app_requests (app_id, created_at DESC);

-- Ids are not foreign keys, as for app_requests: the sampler writes after the fact; deleting an app deletes its samples.
CREATE TABLE app_usage_samples (
  instance text NOT NULL,
  sampled_at timestamptz NOT NULL,
  organization_id uuid NOT NULL,
  app_id uuid NOT NULL,
  service_id uuid NOT NULL,
  deployment_id uuid NOT NULL,
  covers_ms bigint NOT NULL,
  memory_bytes bigint NOT NULL,
  cpu_ms bigint NOT NULL,
  -- CPU time since the instance started: the next sample's cpu_ms is the difference.
  cpu_total_ms bigint NOT NULL,
  processes integer NOT NULL,
  PRIMARY KEY (instance, sampled_at)
);
CREATE INDEX app_usage_samples_app_time ON app_usage_samples (app_id, sampled_at);
CREATE INDEX app_usage_samples_org_time ON app_usage_samples (organization_id, sampled_at);
`,
  },
  {
    owner: 'apps-traffic',
    version: 2,
    name: 'app_requests by app, time and id: the lists of an app and of its service',
    sql: `
-- With the id last, a service's list pages by (created_at, id) straight from this index.
DROP INDEX app_requests_app_time;
CREATE INDEX app_requests_app_time ON app_requests (app_id, created_at DESC, id DESC);
`,
  },
];

export interface UsageSample {
  instance: string;
  sampledAt: Date;
  organizationId: string;
  appId: string;
  serviceId: string;
  deploymentId: string;
  coversMs: number;
  memoryBytes: number;
  cpuMs: number;
  cpuTotalMs: number;
  processes: number;
}

function sampleOf(row: Record<string, unknown>): UsageSample {
  return {
    instance: row['instance'] as string,
    sampledAt: row['sampled_at'] as Date,
    organizationId: row['organization_id'] as string,
    appId: row['app_id'] as string,
    serviceId: row['service_id'] as string,
    deploymentId: row['deployment_id'] as string,
    coversMs: Number(row['covers_ms']),
    memoryBytes: Number(row['memory_bytes']),
    cpuMs: Number(row['cpu_ms']),
    cpuTotalMs: Number(row['cpu_total_ms']),
    processes: Number(row['processes']),
  };
}

export class UsageSampleStore {
  constructor(private readonly db: Queryable) {}

  /** The newest sample of each of these instances. */
  async latestOf(instances: readonly string[]): Promise<Map<string, { sampledAt: Date; cpuTotalMs: number }>> {
    if (instances.length === 0) return new Map();
    const { rows } = await this.db.query(
      `SELECT DISTINCT ON (instance) instance, sampled_at, cpu_total_ms FROM app_usage_samples
       WHERE instance = ANY($1::text[]) ORDER BY instance, sampled_at DESC`,
      [instances],
    );
    return new Map(rows.map((row) => [row['instance'] as string, { sampledAt: row['sampled_at'] as Date, cpuTotalMs: Number(row['cpu_total_ms']) }]));
  }

  /** Which app and organisation each service belongs to (services deleted meanwhile are absent). */
  async owners(serviceIds: readonly string[]): Promise<Map<string, { appId: string; organizationId: string }>> {
    if (serviceIds.length === 0) return new Map();
    const { rows } = await this.db.query('SELECT id, app_id, organization_id FROM app_services WHERE id = ANY($1::uuid[])', [serviceIds]);
    return new Map(rows.map((row) => [row['id'] as string, { appId: row['app_id'] as string, organizationId: row['organization_id'] as string }]));
  }

  async insert(samples: readonly UsageSample[]): Promise<number> {
    if (samples.length === 0) return 0;
    const column = <K extends keyof UsageSample>(key: K) => samples.map((sample) => sample[key]);
    const { rowCount } = await this.db.query(
      `INSERT INTO app_usage_samples (instance, sampled_at, organization_id, app_id, service_id, deployment_id,
         covers_ms, memory_bytes, cpu_ms, cpu_total_ms, processes)
       SELECT * FROM unnest($1::text[], $2::timestamptz[], $3::uuid[], $4::uuid[], $5::uuid[], $6::uuid[],
         $7::bigint[], $8::bigint[], $9::bigint[], $10::bigint[], $11::int[])
       ON CONFLICT (instance, sampled_at) DO NOTHING`,
      [
        column('instance'),
        column('sampledAt').map((at) => at.toISOString()),
        column('organizationId'),
        column('appId'),
        column('serviceId'),
        column('deploymentId'),
        column('coversMs'),
        column('memoryBytes'),
        column('cpuMs'),
        column('cpuTotalMs'),
        column('processes'),
      ],
    );
    return rowCount;
  }

  /** Samples taken in [from, to), oldest first: of one app, or of a whole organisation. */
  async between(owner: { appId: string } | { organizationId: string }, from: Date, to: Date): Promise<UsageSample[]> {
    const [column, id] = 'appId' in owner ? ['app_id', owner.appId] : ['organization_id', owner.organizationId];
    const { rows } = await this.db.query(
      `SELECT * FROM app_usage_samples WHERE ${column} = $1::uuid AND sampled_at >= $2::timestamptz AND sampled_at < $3::timestamptz
       ORDER BY sampled_at, instance`,
      [id, from, to],
    );
    return rows.map(sampleOf);
  }

  /** Removes samples older than `before`; answers how many. */
  async prune(before: Date): Promise<number> {
    const { rowCount } = await this.db.query('DELETE FROM app_usage_samples WHERE sampled_at < $1::timestamptz', [before]);
    return rowCount;
  }
}

/** The organisation's usage samples go with it. */
export const usageSamplesEraser: OrganizationEraser = {
  name: 'app usage samples',
  async erase(tx, organizationId) {
    const { rowCount } = await tx.query('DELETE FROM app_usage_samples WHERE organization_id = $1', [organizationId]);
    return rowCount;
  },
};

/**
 * One round of sampling: what the runtime reports of every running instance, stored with the time
 * and CPU since that instance's previous sample (or its start), then samples past retention removed.
 */
export async function sampleUsage(
  deps: { samples: UsageSampleStore; clock: () => Date; retentionMs: number },
  runtime: { usage(): Promise<InstanceUsage[]> },
): Promise<{ written: number; pruned: number }> {
  const usages = await runtime.usage();
  const now = deps.clock();
  const previous = await deps.samples.latestOf(usages.map((usage) => usage.instance));
  const owners = await deps.samples.owners([...new Set(usages.map((usage) => usage.serviceId))]);
  const samples: UsageSample[] = [];
  for (const usage of usages) {
    const owner = owners.get(usage.serviceId);
    if (!owner) continue;
    const before = previous.get(usage.instance);
    const since = Math.max(before?.sampledAt.getTime() ?? Number.NEGATIVE_INFINITY, Date.parse(usage.startedAt));
    if (before && before.sampledAt.getTime() >= now.getTime()) continue;
    samples.push({
      instance: usage.instance,
      sampledAt: now,
      ...owner,
      serviceId: usage.serviceId,
      deploymentId: usage.deploymentId,
      coversMs: Math.max(0, now.getTime() - since),
      memoryBytes: usage.memoryBytes,
      cpuMs: Math.max(0, usage.cpuMs - (before?.cpuTotalMs ?? 0)),
      cpuTotalMs: usage.cpuMs,
      processes: usage.processes,
    });
  }
  const written = await deps.samples.insert(samples);
  const pruned = await deps.samples.prune(new Date(now.getTime() - deps.retentionMs));
  return { written, pruned };
}
