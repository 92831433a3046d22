import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import type { RouteAuth } from '../../core/http/fastify-types.ts';
import { sendFile } from '../../core/http/file-answer.ts';
import { FIELDS_ALLOWANCE_BYTES } from '../../core/http/operation-uploads.ts';
import { mountUploadRoutes, readUpload } from '../../core/http/uploads.ts';
import { authorizedRecord } from '../../core/identity/authorization.ts';
import type { Credential } from '../../core/identity/credential.ts';
import { ApiError } from '../../core/kernel/errors.ts';
import { parseInput } from '../../core/operations/operations.ts';
import type { BlobInfo } from '../../core/ports/blobs.ts';
import type { FileOwner } from '../../core/ports/files.ts';
import { resourceId } from '../../core/vocabulary/ids.ts';
import { type BatchFileLimits, BatchUploadCheck } from './batch-lines.ts';
import type { FileStore } from './file-store.ts';
import { fileObject } from './file-view.ts';
import type { FilesConfig } from './files-config.ts';
import type { StoredFiles } from './gateway-files.ts';

/** OpenAI's upload purposes; `batch` files are checked as batch input, the others stored as given. */
export const UPLOAD_PURPOSES = ['assistants', 'batch', 'fine-tune', 'vision', 'user_data', 'evals'] as const;

/** OpenAI's bounds on `expires_after[seconds]`: an hour to 30 days. */
const EXPIRY_SECONDS = { min: 3_600, max: 2_592_000 };

/** The text fields of an upload, as OpenAI's SDK sends them (`expires_after` flattened into two). */
const uploadFields = z.strictObject({
  purpose: z.enum(UPLOAD_PURPOSES),
  'expires_after[anchor]': z.literal('created_at').optional(),
  'expires_after[seconds]': z.coerce.number().int().min(EXPIRY_SECONDS.min).max(EXPIRY_SECONDS.max).optional(),
});
/** Fields the parser reads before refusing the body as too large: room to name an unknown one first. */
const MAX_UPLOAD_FIELDS = 8;

/** The query of `GET /v1/files`, OpenAI's: `after` an id, `limit` up to 10,000 (the default), `order`, `purpose`. */
export const fileListQuery = z.object({
  after: resourceId.optional().describe('The id of the last file of the previous page'),
  limit: z.coerce.number().int().min(1).max(10_000).default(10_000),
  order: z.enum(['asc', 'desc']).default('desc'),
  purpose: z.string().min(1).max(64).optional(),
});

export interface FileRoutesDeps {
  readonly files: StoredFiles;
  readonly store: FileStore;
  readonly clock: () => Date;
  readonly config: FilesConfig;
  /** `server.bodyLimitBytes`: a batch line is a request body. */
  readonly maxLineBytes: number;
}

const V1 = { surface: 'v1' as const };

/**
 * `/v1/files` as OpenAI's API has it: upload (multipart `file` and `purpose`), list, retrieve,
 * delete and content. Scope `inference`, API keys only (the /v1 surface). A file is its key's
 * project's: every route by id declares the file as its resource (core/http/route-resources.ts),
 * so another project's key, whatever its scopes, meets 404 `file_not_found`, and lists show the
 * caller's project's files alone.
 */
export async function mountFileRoutes(app: FastifyInstance, deps: FileRoutesDeps): Promise<void> {
  const inference: RouteAuth = { scope: 'inference' };
  const fileById = (access: 'read' | 'write'): RouteAuth => ({
    scope: 'inference',
    resource: { kind: deps.files.kind, access, in: 'path', field: 'id', keyOwnProjectOnly: true },
  });
  const recordOf = (request: FastifyRequest) => authorizedRecord(request.authorization!, deps.files.kind).record;

  await mountUploadRoutes(app, (uploads) => {
    uploads.post('/v1/files', { config: { ...V1, auth: inference }, bodyLimit: deps.config.maxFileBytes + FIELDS_ALLOWANCE_BYTES }, (request) => upload(request, deps));
  });

  app.get('/v1/files', { config: { ...V1, auth: inference } }, async (request) => {
    const owner = ownerOf(request.credential!);
    const query = parseInput(fileListQuery, request.query, 'query');
    if (query.after !== undefined && !(await deps.store.exists(owner.projectId, query.after))) {
      throw new ApiError('invalid_parameter', `Invalid 'after' in query: no file ${query.after} in this project; pass the id of the last file of the previous page`, {
        param: 'after',
      });
    }
    const page = await deps.store.page({ organizationId: owner.organizationId, projectId: owner.projectId, ...query }, deps.clock());
    const data = page.items.map(fileObject);
    return { object: 'list', data, first_id: data[0]?.id ?? null, last_id: data.at(-1)?.id ?? null, has_more: page.hasMore };
  });

  app.get('/v1/files/:id', { config: { ...V1, auth: fileById('read') } }, async (request) => fileObject(recordOf(request)));

  app.delete('/v1/files/:id', { config: { ...V1, auth: fileById('write') } }, async (request) => {
    const file = recordOf(request);
    // Deleted by another request since it was found: as absent as any other.
    if (!(await deps.files.delete(file))) throw new ApiError('file_not_found', `No file ${file.id}`, { param: 'id' });
    return { id: file.id, object: 'file', deleted: true };
  });

  app.get('/v1/files/:id/content', { config: { ...V1, auth: fileById('read') } }, async (request, reply: FastifyReply) => {
    const file = recordOf(request);
    return sendFile(reply, { filename: file.filename, contentType: file.contentType, size: file.bytes, stream: await deps.files.open(file) });
  });
}

/** The key's organisation, project and id: whose a new file is, and whose files a list shows. */
function ownerOf(credential: Credential): FileOwner {
  // The /v1 surface admits keys only (core/http/auth-hook.ts).
  if (credential.kind !== 'key') throw new ApiError('api_key_required');
  return { organizationId: credential.organizationId, projectId: credential.projectId, keyId: credential.keyId };
}

/**
 * Reads the multipart upload part by part: each field checked as it arrives (a bad purpose sent
 * before the file is refused before a byte of it is stored), the file streamed into the blob store
 * through the batch check. The purpose may come after the file, as OpenAI's SDK sends it: then the
 * check runs on every file and its verdict counts once the purpose is `batch`. Whatever fails after
 * the blob is stored deletes it.
 */
async function upload(request: FastifyRequest, deps: FileRoutesDeps) {
  const owner = ownerOf(request.credential!);
  const limits: BatchFileLimits = { maxLineBytes: deps.maxLineBytes, maxRequests: deps.config.maxBatchRequests };
  const fields = new Map<string, string>();
  let stored: { blob: BlobInfo; filename: string; check: BatchUploadCheck } | null = null;
  try {
    for await (const part of readUpload(request, { maxFileBytes: deps.config.maxFileBytes, maxFields: MAX_UPLOAD_FIELDS })) {
      if (part.type === 'field') {
        checkField(part.name, part.value, fields);
        fields.set(part.name, part.value);
        continue;
      }
      if (part.name !== 'file') throw new ApiError('unknown_field', `The file is taken under 'file' only, not '${part.name}'`, { param: part.name });
      if (part.filename.trim() === '') throw new ApiError('invalid_parameter', "The part 'file' carries no file name", { param: 'file' });
      const check = new BatchUploadCheck(limits, fields.get('purpose') === 'batch');
      const blob = await deps.files.putContent(owner.organizationId, check.pass(part.stream), deps.config.maxFileBytes);
      stored = { blob, filename: part.filename, check };
    }
    const input = parseInput(uploadFields, Object.fromEntries(fields), 'body');
    if (!stored) throw new ApiError('invalid_parameter', "Invalid 'file' in body: the upload carries no file", { param: 'file' });
    if ((input['expires_after[anchor]'] === undefined) !== (input['expires_after[seconds]'] === undefined)) {
      throw new ApiError('invalid_parameter', "expires_after needs both anchor ('created_at') and seconds", { param: 'expires_after[seconds]' });
    }
    if (input.purpose === 'batch' && stored.check.problem) throw stored.check.problem;
    const file = await deps.files.record(owner, stored.blob, { purpose: input.purpose, filename: stored.filename, expiresAfterSeconds: input['expires_after[seconds]'] ?? null });
    return fileObject(file);
  } catch (error) {
    if (stored) await deps.files.discard(stored.blob.key);
    throw error;
  }
}

/** Each field alone, as it arrives; what needs them all (purpose present, expiry whole) is checked at the end. */
const oneField = uploadFields.partial();

/** One text field, as it arrives: a name the upload takes (400 `unknown_field` naming it), sent once, with a value its schema takes. */
function checkField(name: string, value: string, fields: ReadonlyMap<string, string>): void {
  if (fields.has(name)) throw new ApiError('invalid_parameter', `The field '${name}' is sent twice`, { param: name });
  parseInput(oneField, { [name]: value }, 'body');
}
