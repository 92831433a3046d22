import { randomBytes, randomUUID } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { authorizedRecord } from '../../../core/identity/authorization.ts';
import { sendFile } from '../../../core/http/file-answer.ts';
import { ApiError, describeBytes } from '../../../core/kernel/errors.ts';
import { defineOperation, type AnyOperation, type FileInput } from '../../../core/operations/operations.ts';
import type { BlobStore } from '../../../core/ports/blobs.ts';
import { appRecordKind } from '../apps-operations.ts';
import type { AppsStore } from '../apps-store.ts';
import type { StoredObject, UpkeepStore } from './upkeep-store.ts';
import './upkeep-errors.ts';

/** Blob keys of an organisation's app files: one prefix per organisation (its erasure lists it). */
export const appStoragePrefix = (organizationId: string) => `apps-storage/${organizationId}/`;

/** Where a public file is served, without a key: `<origin>/app-storage/<token>`. */
export const PUBLIC_STORAGE_PATH = '/app-storage';

export interface StorageDeps {
  store: AppsStore;
  upkeep: UpkeepStore;
  blobs: BlobStore;
  clock: () => Date;
  limits: { maxFileBytes: number; maxAppBytes: number; maxObjects: number };
}

const objectName = z
  .string()
  .min(1)
  .max(255)
  .regex(/^[A-Za-z0-9._-]+(\/[A-Za-z0-9._-]+)*$/, 'letters, digits, dots, dashes and underscores, in segments joined by /')
  .refine((name) => !name.split('/').some((segment) => segment === '.' || segment === '..'), 'no . or .. segment')
  .describe('The file’s name in the app’s storage, e.g. `uploads/cat.png`');

const storedObjectView = z
  .object({
    object: z.literal('app_storage_object'),
    id: z.string(),
    appId: z.string(),
    name: z.string(),
    size: z.number().describe('Bytes'),
    contentType: z.string().describe('Read from its bytes when it was stored'),
    sha256: z.string(),
    public: z.boolean(),
    publicUrl: z.string().nullable().describe('Readable by anyone with it, without a key; null while private'),
    createdAt: z.string(),
    updatedAt: z.string(),
  })
  .meta({ id: 'AppStorageObject', description: 'A file in an app’s storage' });

const storageListView = z
  .object({
    object: z.literal('list'),
    data: z.array(storedObjectView),
    usage: z.object({
      bytes: z.number(),
      objects: z.number(),
      maxBytes: z.number().describe('What all the app’s files may take together'),
      maxFileBytes: z.number().describe('The largest one upload may carry'),
    }),
  })
  .meta({ id: 'AppStorageList', description: 'An app’s stored files by name, and what they take' });

const deletedView = z
  .object({ object: z.literal('app_storage_object'), name: z.string(), deleted: z.literal(true) })
  .meta({ id: 'AppStorageObjectDeleted', description: 'The file and its bytes are gone' });

const idParams = z.strictObject({ id: z.uuid() });

function viewOf(object: StoredObject, origin: string) {
  return {
    object: 'app_storage_object' as const,
    id: object.id,
    appId: object.appId,
    name: object.name,
    size: object.size,
    contentType: object.contentType,
    sha256: object.sha256,
    public: object.publicToken !== null,
    publicUrl: object.publicToken === null ? null : `${origin}${PUBLIC_STORAGE_PATH}/${object.publicToken}`,
    createdAt: object.createdAt.toISOString(),
    updatedAt: object.updatedAt.toISOString(),
  };
}

const baseName = (filename: string) =>
  filename
    .replace(/[^A-Za-z0-9._-]+/g, '_')
    .replace(/^\.+/, '_')
    .slice(0, 255) || 'file';

/**
 * File storage for an app (wide routes) on the kernel's blobs port: list, upload (a size cap per
 * file, a quota per app), delete, and make a file public at an unguessable URL served without a key.
 * The app itself reaches the same routes with its own key (README.md "App storage").
 */
export function storageOperations(deps: StorageDeps): AnyOperation[] {
  const { store, upkeep, blobs, clock, limits } = deps;
  const appKind = appRecordKind(store);
  const readApp = { kind: appKind, access: 'read', in: 'path', field: 'id' } as const;
  const writeApp = { kind: appKind, access: 'write', in: 'path', field: 'id' } as const;
  const origin = (ctx: { origin?: string }) => ctx.origin ?? '';
  const files: FileInput = {
    field: 'file',
    maxFiles: 1,
    maxFileBytes: limits.maxFileBytes,
    prefix: (credential) => appStoragePrefix(credential.organizationId),
    description: `One file of at most ${describeBytes(limits.maxFileBytes)} (multipart only); its type is read from its bytes`,
  };

  const list = defineOperation({
    name: 'apps.storage.list',
    method: 'GET',
    path: '/apps/:id/storage',
    summary: 'The app’s stored files; with `name` and Accept: application/octet-stream, that file',
    description:
      'Lists the app’s files by name with what they take. With `name`, only that file (404 when absent); a request ' +
      'with `Accept: application/octet-stream` then gets its bytes, always as a download.',
    scope: null,
    wide: true,
    readOnly: true,
    params: idParams,
    query: z.strictObject({ name: objectName.optional() }),
    resource: readApp,
    output: storageListView,
    errors: ['storage_object_not_found'],
    async handler({ query }, ctx) {
      const app = authorizedRecord(ctx.authorization, appKind).record;
      const all = await upkeep.objects(app.id);
      const data = query.name === undefined ? all : all.filter((object) => object.name === query.name);
      if (query.name !== undefined && data.length === 0) throw new ApiError('storage_object_not_found', `No file ${query.name}`, { param: 'name' });
      const bytes = all.reduce((sum, object) => sum + object.size, 0);
      return {
        object: 'list' as const,
        data: data.map((object) => viewOf(object, origin(ctx))),
        usage: { bytes, objects: all.length, maxBytes: limits.maxAppBytes, maxFileBytes: limits.maxFileBytes },
      };
    },
    async download(output) {
      const [first] = output.data;
      if (output.data.length !== 1 || !first) throw new ApiError('storage_object_not_found', 'Name one file (query `name`) to download it', { param: 'name' });
      const object = await upkeep.object(first.appId, first.name);
      const blob = object ? await blobs.get(object.blobKey) : null;
      if (!object || !blob) throw new ApiError('storage_object_not_found', `The contents of ${first.name} are gone`, { param: 'name' });
      return { filename: object.name.split('/').at(-1)!, contentType: object.contentType, size: blob.info.size, stream: blob.stream };
    },
  });

  const upload = defineOperation({
    name: 'apps.storage.upload',
    method: 'POST',
    path: '/apps/:id/storage',
    summary: 'Store a file in the app’s storage (multipart), replacing one of the same name',
    description:
      `multipart/form-data with the file under \`file\` (at most ${describeBytes(limits.maxFileBytes)}) and, optionally, ` +
      '`name` (default: the uploaded file’s name); over MCP, which carries no file, it is a 400. A file of the same name is replaced; a public one stays public at ' +
      `its URL. 409 \`storage_quota_exceeded\` past ${describeBytes(limits.maxAppBytes)} or ${limits.maxObjects} files per app.`,
    scope: 'apps:deploy',
    ownAppKey: true,
    wide: true,
    readOnly: false,
    idempotent: true,
    params: idParams,
    body: z.strictObject({ name: objectName.optional() }),
    bodyRequired: false,
    files,
    resource: writeApp,
    output: storedObjectView,
    errors: ['storage_quota_exceeded'],
    async handler({ body, files: received = [] }, ctx) {
      const app = authorizedRecord(ctx.authorization, appKind).record;
      const file = received[0];
      if (!file) throw new ApiError('invalid_parameter', 'Send the file as multipart/form-data under `file`', { param: 'file' });
      const name = body?.name ?? baseName(file.filename);
      const { object, replacedBlob } = await ctx.transaction(async (tx) => {
        const stored = await upkeep.putObject(
          tx,
          {
            id: randomUUID(),
            appId: app.id,
            organizationId: app.organizationId,
            name,
            blobKey: file.blob.key,
            size: file.blob.size,
            contentType: file.blob.contentType,
            sha256: file.blob.sha256,
          },
          clock(),
        );
        const usage = await upkeep.usage(tx, app.id);
        if (usage.bytes > limits.maxAppBytes || usage.objects > limits.maxObjects) {
          throw new ApiError(
            'storage_quota_exceeded',
            `The app’s files would take ${describeBytes(usage.bytes)} in ${usage.objects} files, over its ` +
              `${describeBytes(limits.maxAppBytes)} or ${limits.maxObjects} files: delete some first`,
            { param: 'file' },
          );
        }
        return stored;
      });
      if (replacedBlob && replacedBlob !== object.blobKey) await blobs.delete(replacedBlob).catch(() => undefined);
      return viewOf(object, origin(ctx));
    },
  });

  const remove = defineOperation({
    name: 'apps.storage.delete',
    method: 'DELETE',
    path: '/apps/:id/storage',
    summary: 'Delete a file from the app’s storage (its public URL stops answering)',
    scope: 'apps:deploy',
    ownAppKey: true,
    wide: true,
    readOnly: false,
    destructive: true,
    idempotent: true,
    params: idParams,
    query: z.strictObject({ name: objectName }),
    resource: writeApp,
    output: deletedView,
    errors: ['storage_object_not_found'],
    async handler({ query }, ctx) {
      const app = authorizedRecord(ctx.authorization, appKind).record;
      const removed = await upkeep.deleteObject(app.id, query.name);
      if (!removed) throw new ApiError('storage_object_not_found', `No file ${query.name}`, { param: 'name' });
      await blobs.delete(removed.blobKey).catch(() => undefined);
      return { object: 'app_storage_object' as const, name: removed.name, deleted: true as const };
    },
  });

  const makePublic = defineOperation({
    name: 'apps.storage.public',
    method: 'POST',
    path: '/apps/:id/storage/public',
    summary: 'Make a stored file readable by anyone with its URL, or private again',
    description:
      'Public gives the file an unguessable URL (`<origin>/app-storage/<token>`) that answers it without a key; private ' +
      'ends that URL for good (making it public again gives a new one).',
    scope: 'apps:deploy',
    ownAppKey: true,
    wide: true,
    readOnly: false,
    idempotent: false,
    params: idParams,
    body: z.strictObject({ name: objectName, public: z.boolean().describe('True: readable at its URL without a key; false: private') }),
    resource: writeApp,
    output: storedObjectView,
    errors: ['storage_object_not_found'],
    async handler({ body }, ctx) {
      const app = authorizedRecord(ctx.authorization, appKind).record;
      const current = await upkeep.object(app.id, body.name);
      if (!current) throw new ApiError('storage_object_not_found', `No file ${body.name}`, { param: 'name' });
      // Already public stays at its URL (a repeated call changes nothing); private ends it.
      const token = body.public ? (current.publicToken ?? randomBytes(24).toString('base64url')) : null;
      const updated = await upkeep.setPublicToken(app.id, body.name, token, clock());
      if (!updated) throw new ApiError('storage_object_not_found', `No file ${body.name}`, { param: 'name' });
      return viewOf(updated, origin(ctx));
    },
  });

  return [list, upload, remove, makePublic];
}

/** `GET /app-storage/<token>`: a public file, without a key; anything else is a plain 404. */
export function mountPublicStorage(app: FastifyInstance, deps: Pick<StorageDeps, 'upkeep' | 'blobs'>): void {
  app.get<{ Params: { token: string } }>(`${PUBLIC_STORAGE_PATH}/:token`, { config: { auth: false } }, async (request, reply) => {
    const token = request.params.token;
    const object = /^[A-Za-z0-9_-]{32}$/.test(token) ? await deps.upkeep.publicObject(token) : null;
    const blob = object ? await deps.blobs.get(object.blobKey) : null;
    if (!object || !blob) throw new ApiError('storage_object_not_found');
    return sendFile(reply, { filename: object.name.split('/').at(-1)!, contentType: object.contentType, size: blob.info.size, stream: blob.stream }, { shared: true });
  });
}
