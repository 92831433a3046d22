import type { Queryable } from '../../core/ports/database.ts';

/** The history a service keeps: what GET /services/{id}/deployments lists and rollback may name. */
export const DEPLOY_HISTORY = 20;

export type DeploymentStatus = 'queued' | 'cloning' | 'building' | 'starting' | 'live' | 'failed' | 'cancelled' | 'retired';

export interface AppRecord {
  id: string;
  organizationId: string;
  projectId: string;
  name: string;
  slug: string;
  /** `githost`: a repository of the git host; `url`: an http(s) repository elsewhere; `template`: templates/apps/<id>. */
  sourceKind: 'githost' | 'url' | 'template';
  sourceRepo: string | null;
  sourceUrl: string | null;
  branch: string;
  rootDir: string | null;
  startCommand: string | null;
  deployOnPush: boolean;
  cell: string;
  status: string;
  createdAt: Date;
  updatedAt: Date;
}

export interface ServiceRecord {
  id: string;
  appId: string;
  organizationId: string;
  kind: 'web';
  desired: 'running' | 'stopped';
  routeTarget: string | null;
  routeDeploymentId: string | null;
  routeRevision: number;
  createdAt: Date;
}

/** Milliseconds per phase; null for a phase that did not run. */
export interface Timings {
  clone: number | null;
  build: number | null;
  deploy: number | null;
}

export interface DeploymentRecord {
  id: string;
  serviceId: string;
  organizationId: string;
  commitSha: string | null;
  reason: 'create' | 'push' | 'redeploy' | 'rollback';
  rollbackOf: string | null;
  status: DeploymentStatus;
  failureReason: string | null;
  /** Why it failed, as a code (apps-views.ts FAILURE_CODES); null unless failed. */
  failureCode: string | null;
  timings: Timings | null;
  imageSizeBytes: number | null;
  decision: Record<string, unknown> | null;
  artifactDir: string | null;
  startCommand: string | null;
  logBlob: string | null;
  createdAt: Date;
  startedAt: Date | null;
  finishedAt: Date | null;
}

const json = (value: unknown) => (typeof value === 'string' ? JSON.parse(value) : value);

function appOf(row: Record<string, unknown>): AppRecord {
  return {
    id: row['id'] as string,
    organizationId: row['organization_id'] as string,
    projectId: row['project_id'] as string,
    name: row['name'] as string,
    slug: row['slug'] as string,
    sourceKind: row['source_kind'] as AppRecord['sourceKind'],
    sourceRepo: (row['source_repo'] as string | null) ?? null,
    sourceUrl: (row['source_url'] as string | null) ?? null,
    branch: row['branch'] as string,
    rootDir: (row['root_dir'] as string | null) ?? null,
    startCommand: (row['start_command'] as string | null) ?? null,
    deployOnPush: row['deploy_on_push'] as boolean,
    cell: row['cell'] as string,
    status: row['status'] as string,
    createdAt: new Date(row['created_at'] as string),
    updatedAt: new Date(row['updated_at'] as string),
  };
}

function serviceOf(row: Record<string, unknown>): ServiceRecord {
  return {
    id: row['id'] as string,
    appId: row['app_id'] as string,
    organizationId: row['organization_id'] as string,
    kind: 'web',
    desired: row['desired'] as ServiceRecord['desired'],
    routeTarget: (row['route_target'] as string | null) ?? null,
    routeDeploymentId: (row['route_deployment_id'] as string | null) ?? null,
    routeRevision: Number(row['route_revision']),
    createdAt: new Date(row['created_at'] as string),
  };
}

function deploymentOf(row: Record<string, unknown>): DeploymentRecord {
  const date = (value: unknown) => (value === null || value === undefined ? null : new Date(value as string));
  return {
    id: row['id'] as string,
    serviceId: row['service_id'] as string,
    organizationId: row['organization_id'] as string,
    commitSha: (row['commit_sha'] as string | null) ?? null,
    reason: row['reason'] as DeploymentRecord['reason'],
    rollbackOf: (row['rollback_of'] as string | null) ?? null,
    status: row['status'] as DeploymentStatus,
    failureReason: (row['failure_reason'] as string | null) ?? null,
    failureCode: (row['failure_code'] as string | null) ?? null,
    timings: (json(row['timings']) as Timings | null) ?? null,
    imageSizeBytes: row['image_size_bytes'] === null ? null : Number(row['image_size_bytes']),
    decision: (json(row['decision']) as Record<string, unknown> | null) ?? null,
    artifactDir: (row['artifact_dir'] as string | null) ?? null,
    startCommand: (row['start_command'] as string | null) ?? null,
    logBlob: (row['log_blob'] as string | null) ?? null,
    createdAt: new Date(row['created_at'] as string),
    startedAt: date(row['started_at']),
    finishedAt: date(row['finished_at']),
  };
}

export interface NewApp extends Omit<AppRecord, 'createdAt' | 'updatedAt' | 'status'> {}

/** The apps plugin's SQL: apps, their services and deployments. */
export class AppsStore {
  constructor(private readonly db: Queryable) {}

  async createApp(tx: Queryable, app: NewApp, serviceId: string, now: Date): Promise<{ app: AppRecord; service: ServiceRecord }> {
    const { rows } = await tx.query(
      `INSERT INTO apps (id, organization_id, project_id, name, slug, source_kind, source_repo, source_url, branch, root_dir,
         start_command, deploy_on_push, cell, status, created_at, updated_at)
       VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12,$13,'deploying',$14,$14)
       ON CONFLICT DO NOTHING RETURNING *`,
      [
        app.id,
        app.organizationId,
        app.projectId,
        app.name,
        app.slug,
        app.sourceKind,
        app.sourceRepo,
        app.sourceUrl,
        app.branch,
        app.rootDir,
        app.startCommand,
        app.deployOnPush,
        app.cell,
        now,
      ],
    );
    if (rows.length === 0) throw new AppNameTaken();
    const service = await tx.query(`INSERT INTO app_services (id, app_id, organization_id, kind, desired, created_at) VALUES ($1,$2,$3,'web','running',$4) RETURNING *`, [
      serviceId,
      app.id,
      app.organizationId,
      now,
    ]);
    return { app: appOf(rows[0]!), service: serviceOf(service.rows[0]!) };
  }

  async app(organizationId: string, id: string): Promise<AppRecord | null> {
    const { rows } = await this.db.query('SELECT * FROM apps WHERE organization_id = $1 AND id = $2', [organizationId, id]);
    return rows[0] ? appOf(rows[0]) : null;
  }

  async appById(id: string): Promise<AppRecord | null> {
    const { rows } = await this.db.query('SELECT * FROM apps WHERE id = $1', [id]);
    return rows[0] ? appOf(rows[0]) : null;
  }

  async apps(organizationId: string, projectIds: readonly string[] | null): Promise<AppRecord[]> {
    const { rows } = await this.db.query('SELECT * FROM apps WHERE organization_id = $1 AND ($2::uuid[] IS NULL OR project_id = ANY($2::uuid[])) ORDER BY created_at DESC, id DESC', [
      organizationId,
      projectIds,
    ]);
    return rows.map(appOf);
  }

  /** The apps deploying from a branch of a repository of the organisation's git host. */
  async tracking(organizationId: string, repo: string, branch: string): Promise<AppRecord[]> {
    const { rows } = await this.db.query(`SELECT * FROM apps WHERE organization_id = $1 AND source_kind = 'githost' AND source_repo = $2 AND branch = $3`, [organizationId, repo, branch]);
    return rows.map(appOf);
  }

  async setAppStatus(appId: string, status: string, now: Date): Promise<void> {
    await this.db.query('UPDATE apps SET status = $2, updated_at = $3 WHERE id = $1', [appId, status, now]);
  }

  /** Moves the app to another project of its organisation (its key follows: plugins/keys/app-keys.ts). */
  async setProject(tx: Queryable, appId: string, projectId: string): Promise<void> {
    await tx.query('UPDATE apps SET project_id = $2 WHERE id = $1', [appId, projectId]);
  }

  async deleteApp(tx: Queryable, appId: string): Promise<void> {
    await tx.query('DELETE FROM apps WHERE id = $1', [appId]);
  }

  async services(appId: string): Promise<ServiceRecord[]> {
    const { rows } = await this.db.query('SELECT * FROM app_services WHERE app_id = $1 ORDER BY created_at', [appId]);
    return rows.map(serviceOf);
  }

  async service(organizationId: string, id: string): Promise<ServiceRecord | null> {
    const { rows } = await this.db.query('SELECT * FROM app_services WHERE organization_id = $1 AND id = $2', [organizationId, id]);
    return rows[0] ? serviceOf(rows[0]) : null;
  }

  async serviceById(id: string): Promise<ServiceRecord | null> {
    const { rows } = await this.db.query('SELECT * FROM app_services WHERE id = $1', [id]);
    return rows[0] ? serviceOf(rows[0]) : null;
  }

  async setDesired(serviceId: string, desired: ServiceRecord['desired']): Promise<void> {
    await this.db.query('UPDATE app_services SET desired = $2 WHERE id = $1', [serviceId, desired]);
  }

  /** Records where the service is served from now; answers the new revision, or null for a service gone. */
  async setRoute(serviceId: string, deploymentId: string | null, target: string | null): Promise<number | null> {
    const { rows } = await this.db.query<{ route_revision: string }>(
      `UPDATE app_services SET route_target = $2, route_deployment_id = $3,
         route_revision = GREATEST(route_revision + 1, (extract(epoch FROM clock_timestamp()) * 1000)::bigint)
       WHERE id = $1 RETURNING route_revision`,
      [serviceId, target, deploymentId],
    );
    return rows[0] ? Number(rows[0].route_revision) : null;
  }

  /** Every app's web service with where it is served from: the proxy's full route table. */
  async routes(): Promise<Array<{ app: AppRecord; service: ServiceRecord }>> {
    const { rows } = await this.db.query(
      `SELECT a.*, s.id AS s_id, s.app_id AS s_app_id, s.organization_id AS s_organization_id, s.desired AS s_desired,
         s.route_target AS s_route_target, s.route_deployment_id AS s_route_deployment_id,
         s.route_revision AS s_route_revision, s.created_at AS s_created_at
       FROM apps a JOIN app_services s ON s.app_id = a.id AND s.kind = 'web'`,
    );
    return rows.map((row) => ({
      app: appOf(row),
      service: serviceOf(
        Object.fromEntries(
          Object.entries(row)
            .filter(([k]) => k.startsWith('s_'))
            .map(([k, v]) => [k.slice(2), v]),
        ),
      ),
    }));
  }

  /** A new deployment; with an idempotency key already used, the deployment made then (created false). */
  async createDeployment(
    tx: Queryable,
    deployment: Pick<DeploymentRecord, 'id' | 'serviceId' | 'organizationId' | 'commitSha' | 'reason' | 'rollbackOf' | 'decision'> & {
      idempotencyKey: string | null;
      artifactDir?: string | null;
      startCommand?: string | null;
      imageSizeBytes?: number | null;
    },
    now: Date,
  ): Promise<{ deployment: DeploymentRecord; created: boolean }> {
    const { rows } = await tx.query(
      `INSERT INTO app_deployments (id, service_id, organization_id, commit_sha, idempotency_key, reason, rollback_of, status, decision,
         artifact_dir, start_command, image_size_bytes, created_at)
       VALUES ($1,$2,$3,$4,$5,$6,$7,'queued',$8,$9,$10,$11,$12) ON CONFLICT (idempotency_key) DO NOTHING RETURNING *`,
      [
        deployment.id,
        deployment.serviceId,
        deployment.organizationId,
        deployment.commitSha,
        deployment.idempotencyKey,
        deployment.reason,
        deployment.rollbackOf,
        deployment.decision === null ? null : JSON.stringify(deployment.decision),
        deployment.artifactDir ?? null,
        deployment.startCommand ?? null,
        deployment.imageSizeBytes ?? null,
        now,
      ],
    );
    if (rows[0]) return { deployment: deploymentOf(rows[0]), created: true };
    const existing = await tx.query('SELECT * FROM app_deployments WHERE idempotency_key = $1', [deployment.idempotencyKey]);
    return { deployment: deploymentOf(existing.rows[0]!), created: false };
  }

  async deployment(organizationId: string, id: string): Promise<DeploymentRecord | null> {
    const { rows } = await this.db.query('SELECT * FROM app_deployments WHERE organization_id = $1 AND id = $2', [organizationId, id]);
    return rows[0] ? deploymentOf(rows[0]) : null;
  }

  async deploymentById(id: string): Promise<DeploymentRecord | null> {
    const { rows } = await this.db.query('SELECT * FROM app_deployments WHERE id = $1', [id]);
    return rows[0] ? deploymentOf(rows[0]) : null;
  }

  /** The service's last deployments, newest first. */
  async history(serviceId: string, limit = DEPLOY_HISTORY): Promise<DeploymentRecord[]> {
    const { rows } = await this.db.query('SELECT * FROM app_deployments WHERE service_id = $1 ORDER BY created_at DESC, id DESC LIMIT $2', [serviceId, limit]);
    return rows.map(deploymentOf);
  }

  async update(
    id: string,
    fields: Partial<
      Pick<
        DeploymentRecord,
        'status' | 'failureReason' | 'failureCode' | 'timings' | 'imageSizeBytes' | 'decision' | 'artifactDir' | 'startCommand' | 'logBlob' | 'startedAt' | 'finishedAt' | 'commitSha'
      >
    >,
  ): Promise<void> {
    const columns: Record<string, string> = {
      status: 'status',
      failureReason: 'failure_reason',
      failureCode: 'failure_code',
      timings: 'timings',
      imageSizeBytes: 'image_size_bytes',
      decision: 'decision',
      artifactDir: 'artifact_dir',
      startCommand: 'start_command',
      logBlob: 'log_blob',
      startedAt: 'started_at',
      finishedAt: 'finished_at',
      commitSha: 'commit_sha',
    };
    const entries = Object.entries(fields).filter(([, value]) => value !== undefined);
    if (entries.length === 0) return;
    const sets = entries.map(([key], index) => `${columns[key]} = $${index + 2}`);
    const values = entries.map(([key, value]) => ((key === 'timings' || key === 'decision') && value !== null ? JSON.stringify(value) : value));
    await this.db.query(`UPDATE app_deployments SET ${sets.join(', ')} WHERE id = $1`, [id, ...values]);
  }

  /**
   * Moves an unfinished deployment to its next phase; false when it is no longer unfinished (cancelled
   * meanwhile), so a pipeline never writes over a cancel.
   */
  async advance(id: string, status: 'cloning' | 'building' | 'starting'): Promise<boolean> {
    const { rows } = await this.db.query(`UPDATE app_deployments SET status = $2 WHERE id = $1 AND status IN ('queued', 'cloning', 'building', 'starting') RETURNING id`, [id, status]);
    return rows.length > 0;
  }

  /** Marks the service's queued and building deployments cancelled (never one starting); answers them. */
  async cancelPending(serviceId: string, now: Date): Promise<DeploymentRecord[]> {
    const { rows } = await this.db.query(
      `UPDATE app_deployments SET status = 'cancelled', failure_reason = 'cancelled', finished_at = $2
       WHERE service_id = $1 AND status IN ('queued', 'cloning', 'building') RETURNING *`,
      [serviceId, now],
    );
    return rows.map(deploymentOf);
  }

  /** Changes what an app deploys from (branch) and whether pushes deploy it. */
  async updateSource(tx: Queryable, appId: string, fields: { branch?: string; deployOnPush?: boolean }, now: Date): Promise<AppRecord | null> {
    const { rows } = await tx.query(
      `UPDATE apps SET branch = COALESCE($2, branch), deploy_on_push = COALESCE($3, deploy_on_push), updated_at = $4
       WHERE id = $1 RETURNING *`,
      [appId, fields.branch ?? null, fields.deployOnPush ?? null, now],
    );
    return rows[0] ? appOf(rows[0]) : null;
  }

  /** Other apps of the organisation deploying from the same source (a push to it deploys them too). */
  async sameSource(app: AppRecord): Promise<AppRecord[]> {
    const { rows } = await this.db.query(
      `SELECT * FROM apps WHERE organization_id = $1 AND id <> $2 AND source_kind = $3
         AND source_repo IS NOT DISTINCT FROM $4 AND source_url IS NOT DISTINCT FROM $5 ORDER BY created_at`,
      [app.organizationId, app.id, app.sourceKind, app.sourceRepo, app.sourceUrl],
    );
    return rows.map(appOf);
  }

  /** The other deployments of the service that were live: retired once a newer one is. */
  async retireOthers(serviceId: string, liveId: string): Promise<string[]> {
    const { rows } = await this.db.query<{ id: string }>(`UPDATE app_deployments SET status = 'retired' WHERE service_id = $1 AND id <> $2 AND status = 'live' RETURNING id`, [
      serviceId,
      liveId,
    ]);
    return rows.map((row) => row.id);
  }

  /** Artifacts of deployments past the history: no rollback can name them any more. */
  async artifactsPastHistory(serviceId: string): Promise<Array<{ id: string; artifactDir: string }>> {
    const { rows } = await this.db.query<{ id: string; artifact_dir: string }>(
      `SELECT id, artifact_dir FROM app_deployments WHERE service_id = $1 AND artifact_dir IS NOT NULL AND status <> 'live'
       AND id NOT IN (SELECT id FROM app_deployments WHERE service_id = $1 ORDER BY created_at DESC, id DESC LIMIT $2)
       AND artifact_dir NOT IN (SELECT artifact_dir FROM (SELECT artifact_dir FROM app_deployments WHERE service_id = $1
         ORDER BY created_at DESC, id DESC LIMIT $2) recent WHERE artifact_dir IS NOT NULL)`,
      [serviceId, DEPLOY_HISTORY],
    );
    return rows.map((row) => ({ id: row.id, artifactDir: row.artifact_dir }));
  }

  async eraseOrganization(tx: Queryable, organizationId: string): Promise<{ apps: AppRecord[]; services: string[]; deployments: string[]; artifacts: string[] }> {
    const services = await tx.query<{ id: string }>('SELECT id FROM app_services WHERE organization_id = $1', [organizationId]);
    const deployments = await tx.query<{ id: string; artifact_dir: string | null }>('DELETE FROM app_deployments WHERE organization_id = $1 RETURNING id, artifact_dir', [organizationId]);
    const { rows } = await tx.query('DELETE FROM apps WHERE organization_id = $1 RETURNING *', [organizationId]);
    return {
      apps: rows.map(appOf),
      services: services.rows.map((row) => row.id),
      deployments: deployments.rows.map((row) => row.id),
      artifacts: [...new Set(deployments.rows.flatMap((row) => (row.artifact_dir ? [row.artifact_dir] : [])))],
    };
  }
}

export class AppNameTaken extends Error {
  constructor() {
    super('app name or slug taken');
  }
}
