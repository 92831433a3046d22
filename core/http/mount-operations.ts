import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { authorizeCredential } from '../identity/authorization.ts';
import type { OperationCaller, OperationService } from '../operations/operation-service.ts';
import type { AnyOperation, FileInput, OperationRegistry } from '../operations/operations.ts';
import type { BlobStore } from '../ports/blobs.ts';
import { acceptsOctetStream, sendFile } from './file-answer.ts';
import { sendFollowed } from './follow-answer.ts';
import { discardFiles, receiveOperationUpload } from './operation-uploads.ts';
import { mountUploadRoutes } from './uploads.ts';
import { requestOrigin } from './request-origin.ts';

/** The management surface's two mount points: the main host's and the regional host's. */
export const MANAGEMENT_PREFIXES = ['/client', '/platform/v1'] as const;

export interface MountDeps {
  readonly registry: OperationRegistry;
  readonly service: OperationService;
  /** Where the files of operations that take them are stored. */
  readonly blobs: BlobStore;
  /** The JSON body limit (`server.bodyLimitBytes`), kept on routes that also take multipart. */
  readonly jsonBodyLimit: number;
  /** `server.publicUrl`'s origin: where callers reached the service (links in mail), else each request's own. */
  readonly publicOrigin?: string | null;
}

/**
 * Mounts every operation as a route; the operation service runs it and records its outcome.
 * The scope is checked in `onRequest`, before the body is read; the registry's runner checks it
 * again with owner-only and the declared resources, after input validation (see core/identity/authorization.ts).
 * Operations that take files are mounted where multipart is parsed, JSON still taken at its own
 * limit; an operation with a `download` answers its file to a request that accepts only bytes.
 */
export async function mountOperations(app: FastifyInstance, deps: MountDeps): Promise<void> {
  const { registry } = deps;
  const withFiles: Array<AnyOperation & { files: FileInput }> = [];
  for (const operation of registry.list()) {
    if (operation.files) withFiles.push(operation as AnyOperation & { files: FileInput });
    else for (const prefix of MANAGEMENT_PREFIXES) app.route(routeOf(prefix, operation, deps));
  }
  if (withFiles.length === 0) return;
  await mountUploadRoutes(
    app,
    (uploads) => {
      // The route's limit is the JSON one; a multipart body is counted against its own (operation-uploads.ts).
      for (const operation of withFiles) {
        for (const prefix of MANAGEMENT_PREFIXES) uploads.route({ ...routeOf(prefix, operation, deps), bodyLimit: deps.jsonBodyLimit });
      }
    },
    { json: true },
  );
}

function routeOf(prefix: string, operation: AnyOperation, deps: MountDeps) {
  return {
    method: operation.method,
    url: prefix + operation.path,
    config: { auth: { scope: operation.scope, ...(operation.ownAppKey ? { ownAppKey: true as const } : {}) }, surface: 'client' as const },
    handler: (request: FastifyRequest, reply: FastifyReply) => answer(request, reply, operation, deps),
  };
}

async function answer(request: FastifyRequest, reply: FastifyReply, operation: AnyOperation, deps: MountDeps): Promise<FastifyReply> {
  const caller: OperationCaller = {
    credential: request.credential!,
    requestId: request.id,
    logger: request.log,
    clientAddress: request.ip,
    origin: requestOrigin(request, deps.publicOrigin ?? null),
  };
  const raw = { params: request.params, query: request.query, body: request.body };
  let result: unknown;
  if (operation.files && typeof request.isMultipart === 'function' && request.isMultipart()) {
    // Refused before a byte of a file is stored: what the credential alone decides.
    authorizeCredential(caller.credential, operation);
    const upload = await receiveOperationUpload(request, operation as AnyOperation & { files: FileInput }, deps.blobs, caller.credential);
    try {
      result = await deps.service.call(operation, { ...raw, body: upload.body, files: upload.files }, caller);
    } catch (error) {
      await discardFiles(deps.blobs, upload.files);
      throw error;
    }
  } else {
    result = await deps.service.call(operation, raw, caller);
  }
  if (operation.download && acceptsOctetStream(request.headers.accept)) {
    return sendFile(reply, await operation.download(result, { credential: caller.credential }));
  }
  // The query passed the operation's own check already; parsed again for its typed values.
  if (operation.follow?.requested(operation.query ? operation.query.parse(request.query) : {})) {
    const { follow } = operation;
    return sendFollowed(reply, result, (signal) => follow.stream(result, { credential: caller.credential, signal }));
  }
  return reply.code(operation.status ?? 200).send(result);
}
