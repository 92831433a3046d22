import type { FastifyRequest } from 'fastify';
import type { Credential } from '../identity/credential.ts';
import { ApiError, requestTooLarge } from '../kernel/errors.ts';
import type { AnyOperation, FileInput, ReceivedFile } from '../operations/operations.ts';
import type { BlobStore } from '../ports/blobs.ts';
import { BlobTooLargeError } from '../services/blob-rules.ts';
import { sniffStream } from '../services/content-sniffing.ts';
import { readUpload } from './uploads.ts';

/** Room for an upload's text fields beside its files in the route's body limit. */
export const FIELDS_ALLOWANCE_BYTES = 1024 * 1024;

/** The body limit of a route that takes `files`: every file at its largest, and the fields. */
export function uploadBodyLimit(files: FileInput): number {
  return files.maxFiles * files.maxFileBytes + FIELDS_ALLOWANCE_BYTES;
}

/**
 * Reads an operation's multipart request: text fields become its body (each field once), files under
 * the declared field are streamed into the blob store with their sniffed type. When anything fails
 * (a limit, a malformed body, a file under another field) the blobs stored so far are deleted and
 * the error is answered; the rest of the body is read and dropped (core/http/uploads.ts).
 */
export async function receiveOperationUpload(
  request: FastifyRequest,
  operation: AnyOperation & { files: FileInput },
  blobs: BlobStore,
  credential: Credential,
): Promise<{ body: Record<string, string>; files: ReceivedFile[] }> {
  const declared = operation.files;
  const fields = new Map<string, string>();
  const files: ReceivedFile[] = [];
  const fieldCount = operation.body && 'shape' in operation.body ? Object.keys((operation.body as { shape: object }).shape).length : 0;
  try {
    const limits = { maxBodyBytes: uploadBodyLimit(declared), maxFiles: declared.maxFiles, maxFileBytes: declared.maxFileBytes, maxFields: fieldCount + 4 };
    for await (const part of readUpload(request, limits)) {
      if (part.type === 'field') {
        if (fields.has(part.name)) throw new ApiError('invalid_parameter', `The field '${part.name}' is sent twice`, { param: part.name });
        fields.set(part.name, part.value);
        continue;
      }
      if (part.name !== declared.field) {
        throw new ApiError('unknown_field', `Files are taken under '${declared.field}' only, not '${part.name}'`, { param: part.name });
      }
      const filename = cleanFilename(part.filename);
      // A browser's file input left empty still sends a part with no name and no bytes.
      if (filename === '') {
        part.stream.resume();
        continue;
      }
      const sniffed = await sniffStream(part.stream);
      try {
        const blob = await blobs.put(sniffed.body, { prefix: declared.prefix(credential), contentType: sniffed.contentType, maxBytes: declared.maxFileBytes });
        files.push({ filename, declaredContentType: part.contentType, blob });
      } catch (error) {
        if (error instanceof BlobTooLargeError) throw requestTooLarge(declared.maxFileBytes, `File ${JSON.stringify(part.filename)}`, part.name);
        throw error;
      }
    }
  } catch (error) {
    await discardFiles(blobs, files);
    throw error;
  }
  // fromEntries: a field named `__proto__` stays a field (and the strict body refuses it).
  return { body: Object.fromEntries(fields), files };
}

/** Deletes the stored blobs of a call that failed; a delete that fails is left to no one (they are immutable and unreferenced). */
export async function discardFiles(blobs: BlobStore, files: readonly ReceivedFile[]): Promise<void> {
  await Promise.all(files.map((file) => blobs.delete(file.blob.key).catch(() => false)));
}

/** The last path segment of a client's file name, without control characters, at most 255 characters. */
export function cleanFilename(name: string): string {
  const last = name.split(/[\\/]/).pop() ?? '';
  // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what is removed
  return [...last.replace(/[\u0000-\u001f\u007f]/g, '').trim()].slice(0, 255).join('');
}
