import type { Queryable } from '../../core/ports/database.ts';
import type { StoredFile } from '../../core/ports/files.ts';
import { resourceId } from '../../core/vocabulary/ids.ts';
import { Conditions } from '../../adapters/sql/conditions.ts';
import { date, dateOrNull, str, strOrNull, type Row } from '../../adapters/sql/rows.ts';

/** A file as this plugin keeps it: what other plugins see (StoredFile), and how its bytes are served. */
export interface FileRecord extends StoredFile {
  /** Sniffed from the first bytes (core/services/content-sniffing.ts), never the uploader's word. */
  readonly contentType: string;
  readonly sha256: string;
}

/** One page of a project's files in OpenAI's list order. */
export interface FileListRequest {
  readonly organizationId: string;
  readonly projectId: string;
  readonly purpose?: string | undefined;
  /** The id of the last file of the previous page: the list goes on after it. */
  readonly after?: string | undefined;
  readonly order: 'asc' | 'desc';
  readonly limit: number;
}

const COLUMNS = 'id, organization_id, project_id, key_id, purpose, filename, bytes, content_type, sha256, blob_key, created_at, expires_at';

function toFile(row: Row): FileRecord {
  return {
    id: str(row, 'id'),
    organizationId: str(row, 'organization_id'),
    projectId: str(row, 'project_id'),
    keyId: strOrNull(row, 'key_id'),
    purpose: str(row, 'purpose'),
    filename: str(row, 'filename'),
    bytes: Number(row['bytes']),
    contentType: str(row, 'content_type'),
    sha256: str(row, 'sha256'),
    blobKey: str(row, 'blob_key'),
    createdAt: date(row, 'created_at'),
    expiresAt: dateOrNull(row, 'expires_at'),
  };
}

/** `expires_at` still ahead of `now` (or none): an expired file is not found, before the sweep deletes it. */
const live = (where: Conditions, now: Date) => where.add(`(expires_at IS NULL OR expires_at > ${where.param(now)}::timestamptz)`);

/** The files table (plugins/files/files-migrations.ts). Writes take the caller's transaction when given. */
export class FileStore {
  constructor(private readonly db: Queryable) {}

  async insert(file: FileRecord, tx: Queryable = this.db): Promise<void> {
    await tx.query(`INSERT INTO files (${COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)`, [
      file.id,
      file.organizationId,
      file.projectId,
      file.keyId,
      file.purpose,
      file.filename,
      file.bytes,
      file.contentType,
      file.sha256,
      file.blobKey,
      file.createdAt,
      file.expiresAt,
    ]);
  }

  /** The organisation's file, unexpired at `now`; null for an id that is not a UUID (no file has one). */
  async get(organizationId: string, id: string, now: Date): Promise<FileRecord | null> {
    if (!resourceId.safeParse(id).success) return null;
    const where = new Conditions();
    where.add(`organization_id = ${where.param(organizationId)}::uuid`);
    where.add(`id = ${where.param(id)}::uuid`);
    live(where, now);
    const { rows } = await this.db.query(`SELECT ${COLUMNS} FROM files WHERE ${where.sql}`, where.params);
    return rows[0] ? toFile(rows[0]) : null;
  }

  /** Whether the project holds a file of this id (expired or not): where an `after` cursor may point. */
  async exists(projectId: string, id: string): Promise<boolean> {
    const { rows } = await this.db.query('SELECT 1 FROM files WHERE project_id = $1 AND id = $2', [projectId, id]);
    return rows.length > 0;
  }

  /**
   * One page of a project's unexpired files by (created_at, id), newest first for `desc`, and whether
   * more follow. `after` must name a file of the project (checked with `exists`): the page starts
   * past its position, so files written meanwhile land before the first page, never inside a later one.
   */
  async page(request: FileListRequest, now: Date): Promise<{ items: FileRecord[]; hasMore: boolean }> {
    const where = new Conditions();
    where.add(`organization_id = ${where.param(request.organizationId)}::uuid`);
    const project = where.param(request.projectId);
    where.add(`project_id = ${project}::uuid`);
    live(where, now);
    if (request.purpose !== undefined) where.add(`purpose = ${where.param(request.purpose)}`);
    const [compare, direction] = request.order === 'desc' ? ['<', 'DESC'] : ['>', 'ASC'];
    if (request.after !== undefined) {
      where.add(`(created_at, id) ${compare} (SELECT created_at, id FROM files WHERE project_id = ${project}::uuid AND id = ${where.param(request.after)}::uuid)`);
    }
    const limit = where.param(request.limit + 1);
    const { rows } = await this.db.query(`SELECT ${COLUMNS} FROM files WHERE ${where.sql} ORDER BY created_at ${direction}, id ${direction} LIMIT ${limit}::int`, where.params);
    return { items: rows.slice(0, request.limit).map(toFile), hasMore: rows.length > request.limit };
  }

  /** Deletes the organisation's file; the row it was, or null when there was none. */
  async delete(organizationId: string, id: string): Promise<FileRecord | null> {
    const { rows } = await this.db.query(`DELETE FROM files WHERE organization_id = $1 AND id = $2 RETURNING ${COLUMNS}`, [organizationId, id]);
    return rows[0] ? toFile(rows[0]) : null;
  }

  /** Deletes up to `limit` files expired at `now`; the rows they were (their blobs are the caller's to delete). */
  async deleteExpired(now: Date, limit: number): Promise<FileRecord[]> {
    const { rows } = await this.db.query(`DELETE FROM files WHERE id IN (SELECT id FROM files WHERE expires_at <= $1 ORDER BY expires_at LIMIT $2) RETURNING ${COLUMNS}`, [now, limit]);
    return rows.map(toFile);
  }

  /** Every file row of an organisation whose account is being deleted (the blobs go after the commit). */
  async eraseOrganization(tx: Queryable, organizationId: string): Promise<number> {
    const { rowCount } = await tx.query('DELETE FROM files WHERE organization_id = $1', [organizationId]);
    return rowCount;
  }
}
