import type { BlobStore } from '../../../core/ports/blobs.ts';
import type { Queryable } from '../../../core/ports/database.ts';

export interface StoredObject {
  id: string;
  appId: string;
  organizationId: string;
  name: string;
  blobKey: string;
  size: number;
  contentType: string;
  sha256: string;
  publicToken: string | null;
  createdAt: Date;
  updatedAt: Date;
}

export interface ServiceSettings {
  serviceId: string;
  releaseCommand: string | null;
  mailOnFailure: boolean;
  mailRecipients: string[];
  updatedAt: Date | null;
}

export interface AiFix {
  id: string;
  serviceId: string;
  organizationId: string;
  deploymentId: string;
  model: string;
  requestId: string;
  proposal: string;
  createdAt: Date;
}

const json = (value: unknown) => (typeof value === 'string' ? JSON.parse(value) : value);

function objectOf(row: Record<string, unknown>): StoredObject {
  return {
    id: row['id'] as string,
    appId: row['app_id'] as string,
    organizationId: row['organization_id'] as string,
    name: row['name'] as string,
    blobKey: row['blob_key'] as string,
    size: Number(row['size']),
    contentType: row['content_type'] as string,
    sha256: row['sha256'] as string,
    publicToken: (row['public_token'] as string | null) ?? null,
    createdAt: new Date(row['created_at'] as string),
    updatedAt: new Date(row['updated_at'] as string),
  };
}

function fixOf(row: Record<string, unknown>): AiFix {
  return {
    id: row['id'] as string,
    serviceId: row['service_id'] as string,
    organizationId: row['organization_id'] as string,
    deploymentId: row['deployment_id'] as string,
    model: row['model'] as string,
    requestId: row['request_id'] as string,
    proposal: row['proposal'] as string,
    createdAt: new Date(row['created_at'] as string),
  };
}

/** The upkeep tables' SQL (upkeep-migrations.ts). */
export class UpkeepStore {
  constructor(private readonly db: Queryable) {}

  async objects(appId: string): Promise<StoredObject[]> {
    const { rows } = await this.db.query('SELECT * FROM app_storage_objects WHERE app_id = $1 ORDER BY name', [appId]);
    return rows.map(objectOf);
  }

  async object(appId: string, name: string): Promise<StoredObject | null> {
    const { rows } = await this.db.query('SELECT * FROM app_storage_objects WHERE app_id = $1 AND name = $2', [appId, name]);
    return rows[0] ? objectOf(rows[0]) : null;
  }

  async publicObject(token: string): Promise<StoredObject | null> {
    const { rows } = await this.db.query('SELECT * FROM app_storage_objects WHERE public_token = $1', [token]);
    return rows[0] ? objectOf(rows[0]) : null;
  }

  /** Bytes and files the app holds. */
  async usage(tx: Queryable, appId: string): Promise<{ bytes: number; objects: number }> {
    const { rows } = await tx.query<{ bytes: string | number | null; objects: string | number }>(
      'SELECT sum(size) AS bytes, count(*) AS objects FROM app_storage_objects WHERE app_id = $1',
      [appId],
    );
    return { bytes: Number(rows[0]?.bytes ?? 0), objects: Number(rows[0]?.objects ?? 0) };
  }

  /**
   * Stores the file under its name, replacing one of the same name (its public address stays);
   * answers the stored object and the blob the replaced one had, for the caller to delete.
   */
  async putObject(tx: Queryable, object: Omit<StoredObject, 'publicToken' | 'createdAt' | 'updatedAt'>, now: Date): Promise<{ object: StoredObject; replacedBlob: string | null }> {
    const previous = await tx.query<{ blob_key: string }>('SELECT blob_key FROM app_storage_objects WHERE app_id = $1 AND name = $2 FOR UPDATE', [object.appId, object.name]);
    const { rows } = await tx.query(
      `INSERT INTO app_storage_objects (id, app_id, organization_id, name, blob_key, size, content_type, sha256, created_at, updated_at)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $9)
       ON CONFLICT (app_id, name) DO UPDATE SET blob_key = EXCLUDED.blob_key, size = EXCLUDED.size,
         content_type = EXCLUDED.content_type, sha256 = EXCLUDED.sha256, updated_at = EXCLUDED.updated_at
       RETURNING *`,
      [object.id, object.appId, object.organizationId, object.name, object.blobKey, object.size, object.contentType, object.sha256, now],
    );
    return { object: objectOf(rows[0]!), replacedBlob: previous.rows[0]?.blob_key ?? null };
  }

  async deleteObject(appId: string, name: string): Promise<StoredObject | null> {
    const { rows } = await this.db.query('DELETE FROM app_storage_objects WHERE app_id = $1 AND name = $2 RETURNING *', [appId, name]);
    return rows[0] ? objectOf(rows[0]) : null;
  }

  async setPublicToken(appId: string, name: string, token: string | null, now: Date): Promise<StoredObject | null> {
    const { rows } = await this.db.query('UPDATE app_storage_objects SET public_token = $3, updated_at = $4 WHERE app_id = $1 AND name = $2 RETURNING *', [appId, name, token, now]);
    return rows[0] ? objectOf(rows[0]) : null;
  }

  /** Reads the app's files' blobs in the transaction that deletes the app; answers their deletion, for after it commits. */
  async forgetApp(tx: Queryable, appId: string, blobs: BlobStore): Promise<() => Promise<void>> {
    const { rows } = await tx.query<{ blob_key: string }>('SELECT blob_key FROM app_storage_objects WHERE app_id = $1', [appId]);
    return async () => {
      // A blob left by a failed delete is found by the organisation's erasure (its prefix).
      for (const row of rows) await blobs.delete(row.blob_key).catch(() => undefined);
    };
  }

  async eraseObjects(tx: Queryable, organizationId: string): Promise<number> {
    const { rows } = await tx.query('DELETE FROM app_storage_objects WHERE organization_id = $1 RETURNING id', [organizationId]);
    return rows.length;
  }

  async settings(serviceId: string): Promise<ServiceSettings> {
    const { rows } = await this.db.query('SELECT * FROM app_service_settings WHERE service_id = $1', [serviceId]);
    const row = rows[0];
    if (!row) return { serviceId, releaseCommand: null, mailOnFailure: false, mailRecipients: [], updatedAt: null };
    return {
      serviceId,
      releaseCommand: (row['release_command'] as string | null) ?? null,
      mailOnFailure: row['mail_on_failure'] as boolean,
      mailRecipients: (json(row['mail_recipients']) as string[]) ?? [],
      updatedAt: new Date(row['updated_at'] as string),
    };
  }

  /** Writes the fields given (undefined keeps the stored value). */
  async updateSettings(
    serviceId: string,
    organizationId: string,
    fields: Partial<Pick<ServiceSettings, 'releaseCommand' | 'mailOnFailure' | 'mailRecipients'>>,
    now: Date,
  ): Promise<ServiceSettings> {
    const current = await this.settings(serviceId);
    const next = { ...current, ...Object.fromEntries(Object.entries(fields).filter(([, value]) => value !== undefined)) };
    await this.db.query(
      `INSERT INTO app_service_settings (service_id, organization_id, release_command, mail_on_failure, mail_recipients, updated_at)
       VALUES ($1, $2, $3, $4, $5, $6)
       ON CONFLICT (service_id) DO UPDATE SET release_command = EXCLUDED.release_command,
         mail_on_failure = EXCLUDED.mail_on_failure, mail_recipients = EXCLUDED.mail_recipients, updated_at = EXCLUDED.updated_at`,
      [serviceId, organizationId, next.releaseCommand, next.mailOnFailure, JSON.stringify(next.mailRecipients), now],
    );
    return { ...next, updatedAt: now };
  }

  async addFix(fix: AiFix, keep: number): Promise<void> {
    await this.db.query(
      `INSERT INTO app_ai_fixes (id, service_id, organization_id, deployment_id, model, request_id, proposal, created_at)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
      [fix.id, fix.serviceId, fix.organizationId, fix.deploymentId, fix.model, fix.requestId, fix.proposal, fix.createdAt],
    );
    await this.db.query(
      `DELETE FROM app_ai_fixes WHERE service_id = $1 AND id NOT IN
         (SELECT id FROM app_ai_fixes WHERE service_id = $1 ORDER BY created_at DESC, id DESC LIMIT $2)`,
      [fix.serviceId, keep],
    );
  }

  async fixes(serviceId: string): Promise<AiFix[]> {
    const { rows } = await this.db.query('SELECT * FROM app_ai_fixes WHERE service_id = $1 ORDER BY created_at DESC, id DESC', [serviceId]);
    return rows.map(fixOf);
  }

  async deleteFixes(serviceId: string): Promise<number> {
    const { rows } = await this.db.query('DELETE FROM app_ai_fixes WHERE service_id = $1 RETURNING id', [serviceId]);
    return rows.length;
  }

  /** Bytes each service sent through the proxy since `since` (the proxy's request rows). */
  async bytesOut(organizationId: string, since: Date, serviceIds: readonly string[]): Promise<Map<string, number>> {
    if (serviceIds.length === 0) return new Map();
    const { rows } = await this.db.query<{ service_id: string; bytes: string | number }>(
      `SELECT service_id, sum(bytes_out) AS bytes FROM app_requests
        WHERE organization_id = $1 AND created_at >= $2 AND service_id = ANY($3::uuid[]) GROUP BY service_id`,
      [organizationId, since, serviceIds],
    );
    return new Map(rows.map((row) => [row.service_id, Number(row.bytes)]));
  }
}
