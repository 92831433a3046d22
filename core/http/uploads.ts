import multipart from '@fastify/multipart';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { Readable } from 'node:stream';
import { ApiError, ClientGoneError, requestTooLarge } from '../kernel/errors.ts';
import { installJsonBodyParser } from './json-body-parser.ts';

/**
 * Routes whose bodies are files (`/v1/files`, `/v1/audio/transcriptions`, attachments): multipart
 * bodies read part by part as they arrive, so a 500 MB upload streams into the blob store instead
 * of into memory, with every limit answered in the error envelope.
 *
 * Routes mounted through `mountUploadRoutes` live in a context of their own: only they parse
 * multipart (anything else there is a 415), only they pay for the multipart plugin's hooks, and
 * their body limit defaults to `server.uploadLimitBytes` instead of the 10 MB JSON limit; a route
 * may still declare its own `bodyLimit`. Fastify does not apply body limits to multipart, so
 * `readUpload` counts the bytes itself.
 */
export async function mountUploadRoutes(app: FastifyInstance, routes: (uploads: FastifyInstance) => void | Promise<void>, options: { json?: boolean } = {}): Promise<void> {
  await app.register(async (uploads) => {
    uploads.removeAllContentTypeParsers();
    const accepted = options.json ? 'application/json or multipart/form-data' : 'multipart/form-data';
    uploads.addContentTypeParser('*', (request, _payload, done) => {
      done(new ApiError('unsupported_media_type', `Unsupported content type ${JSON.stringify(request.headers['content-type'] ?? '')}; send ${accepted}`), undefined);
    });
    // Routes that take JSON too (operations with files): the service's JSON parser, at the route's limit.
    if (options.json) installJsonBodyParser(uploads);
    await uploads.register(multipart);
    const defaultLimit = uploads.svc.config.server.uploadLimitBytes;
    uploads.addHook('onRoute', (route) => {
      route.bodyLimit ??= defaultLimit;
    });
    await routes(uploads);
  });
}

export interface UploadLimits {
  /**
   * The whole body; default the route's body limit. For a route that also takes JSON, whose
   * route limit stays the JSON one (core/http/mount-operations.ts).
   */
  maxBodyBytes?: number;
  /** Largest file; default the body limit. */
  maxFileBytes?: number;
  /** Default 1. */
  maxFiles?: number;
  /** Default 32. */
  maxFields?: number;
  /** Largest field value; default 64 KB. */
  maxFieldBytes?: number;
}

export type UploadPart =
  | { type: 'field'; name: string; value: string }
  | {
      type: 'file';
      name: string;
      filename: string;
      contentType: string;
      /** Must be read to its end (or destroyed) before the next part can arrive. */
      stream: Readable;
    };

interface MultipartField {
  type: 'field';
  fieldname: string;
  value: unknown;
  fieldnameTruncated: boolean;
  valueTruncated: boolean;
}
interface MultipartFile {
  type: 'file';
  fieldname: string;
  filename: string;
  mimetype: string;
  file: Readable & { truncated?: boolean };
}

/**
 * The parts of a multipart request, in order, as they arrive. Limits: the route's `bodyLimit`
 * for the whole body (checked against Content-Length first, then counted), and the per-part
 * limits given here. A file over its limit fails its stream with a 413 ApiError, so whatever is
 * reading it (a blob put) stops and cleans up; every other failure is an ApiError too (413, 400
 * `invalid_multipart`, 415). When the caller stops early or anything fails, the rest of the body
 * is read and discarded, so the client receives the answer instead of a reset connection.
 */
export async function* readUpload(request: FastifyRequest, limits: UploadLimits = {}): AsyncGenerator<UploadPart> {
  if (typeof request.isMultipart !== 'function') throw new Error('readUpload is for routes mounted with mountUploadRoutes');
  if (!request.isMultipart()) {
    throw new ApiError('unsupported_media_type', `Unsupported content type ${JSON.stringify(request.headers['content-type'] ?? '')}; send multipart/form-data`);
  }
  const bodyLimit = limits.maxBodyBytes ?? request.routeOptions.bodyLimit;
  if (Number(request.headers['content-length']) > bodyLimit) throw requestTooLarge(bodyLimit);
  const maxFileBytes = limits.maxFileBytes ?? bodyLimit;
  const maxFieldBytes = limits.maxFieldBytes ?? 64 * 1024;

  const parts = request.parts({
    limits: { fileSize: maxFileBytes, files: limits.maxFiles ?? 1, fields: limits.maxFields ?? 32, fieldSize: maxFieldBytes, parts: (limits.maxFiles ?? 1) + (limits.maxFields ?? 32) },
  }) as AsyncGenerator<MultipartField | MultipartFile>;
  // Starting the iteration pipes the request into the parser; the byte count below must see every chunk.
  // A step abandoned for an overflow may still reject later: never as an unhandled rejection.
  const step = () => {
    const pending = parts.next();
    pending.catch(() => undefined);
    return pending;
  };
  let next = step();

  let overflow: ApiError | null = null;
  let currentFile: Readable | null = null;
  let rejectOverflow!: (error: ApiError) => void;
  const overflowed = new Promise<never>((_resolve, reject) => (rejectOverflow = reject));
  overflowed.catch(() => undefined);
  let received = 0;
  const count = (chunk: Buffer): void => {
    received += chunk.length;
    if (received > bodyLimit && overflow === null) {
      overflow = requestTooLarge(bodyLimit);
      currentFile?.destroy(overflow);
      rejectOverflow(overflow);
    }
  };
  request.raw.on('data', count);

  try {
    for (;;) {
      let result: IteratorResult<MultipartField | MultipartFile>;
      try {
        result = await Promise.race([next, overflowed]);
      } catch (error) {
        throw overflow ?? translate(error, maxFileBytes);
      }
      if (result.done) return;
      const part = result.value;
      if (part.type === 'field') {
        if (part.valueTruncated || part.fieldnameTruncated) throw requestTooLarge(maxFieldBytes, `Field ${JSON.stringify(part.fieldname)}`, part.fieldname);
        yield { type: 'field', name: part.fieldname, value: String(part.value) };
      } else {
        const file = part.file;
        currentFile = file;
        const tooLarge = () => requestTooLarge(maxFileBytes, `File ${JSON.stringify(part.filename)}`, part.fieldname);
        yield { type: 'file', name: part.fieldname, filename: part.filename, contentType: part.mimetype, stream: Readable.from(checkedFile(file, tooLarge), { objectMode: false }) };
        currentFile = null;
        if (overflow) throw overflow;
        // A file the caller skipped still has to pass before the parser reaches the next part.
        if (!file.readableEnded && !file.destroyed) file.resume();
      }
      next = step();
    }
  } finally {
    request.raw.off('data', count);
    // Also after the last part: a caller that dropped a file midway ended the parsing early.
    discardRest(request);
  }
}

/**
 * The parser ends a file at its size limit as if it were whole and only marks it truncated (it may
 * have done so before the caller even got the part), so the file fails here instead: a blob put
 * reading it throws and keeps nothing.
 */
async function* checkedFile(file: Readable & { truncated?: boolean }, tooLarge: () => ApiError): AsyncGenerator<Buffer> {
  for await (const chunk of file) {
    if (file.truncated) throw tooLarge();
    yield chunk as Buffer;
  }
  if (file.truncated) throw tooLarge();
}

/** Reads what is left of the body into nothing: the connection stays usable and the client gets its answer. */
function discardRest(request: FastifyRequest): void {
  if (request.raw.readableEnded) return;
  request.raw.unpipe();
  request.raw.resume();
}

function translate(error: unknown, maxFileBytes: number): Error {
  if (error instanceof ApiError || error instanceof ClientGoneError) return error;
  const code = (error as { code?: unknown }).code;
  switch (code) {
    case 'FST_REQ_FILE_TOO_LARGE': {
      const part = (error as { part?: { filename?: string; fieldname?: string } }).part;
      return requestTooLarge(maxFileBytes, part?.filename ? `File ${JSON.stringify(part.filename)}` : 'A file', part?.fieldname ?? null);
    }
    case 'FST_FILES_LIMIT':
      return new ApiError('request_too_large', 'The body holds more files than this route takes');
    case 'FST_FIELDS_LIMIT':
    case 'FST_PARTS_LIMIT':
      return new ApiError('request_too_large', 'The body holds more fields than this route takes');
    case 'FST_MP_PREMATURE_CLOSE':
      return new ClientGoneError();
    case 'FST_INVALID_MULTIPART_CONTENT_TYPE':
      return new ApiError('unsupported_media_type', 'Send multipart/form-data');
    default:
      // The parser's own messages ("Unexpected end of form", "Malformed part header") say what is wrong and nothing more.
      return new ApiError('invalid_multipart', `The multipart body is malformed: ${error instanceof Error ? error.message : String(error)}`);
  }
}
