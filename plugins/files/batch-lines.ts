import { fieldNestedTooDeep, MAX_JSON_DEPTH } from '../../core/http/json-body-parser.ts';
import { ApiError, describeBytes } from '../../core/kernel/errors.ts';
import './files-errors.ts';

/**
 * The batch input format (OpenAI's): JSONL, one request per line,
 * `{"custom_id": "…", "method": "POST", "url": "/v1/chat/completions", "body": {…}}`. Checked line by
 * line as a `batch` file is uploaded (file-routes.ts), and read with the same rules when a batch runs:
 * the batches plugin imports `readBatchLines` (or `parseBatchLine` for one line) from here.
 * A bad line is a 400 `invalid_batch_file` naming its line number (counted from 1, blank lines too).
 */

/**
 * The gateway calls a batch line may make: JSON bodies, JSON answers, no stream (what
 * `GatewayCalls.run` serves and OpenAI's batches take). Other /v1 endpoints take files or answer bytes.
 */
export const BATCH_ENDPOINTS = ['/v1/chat/completions', '/v1/embeddings', '/v1/responses'] as const;
export type BatchEndpoint = (typeof BATCH_ENDPOINTS)[number];

/** The longest `custom_id`: it is echoed on every output line and kept per line by the batch. */
export const MAX_CUSTOM_ID_LENGTH = 512;

/** One request of a batch file, as checked. */
export interface BatchRequestLine {
  /** Counted from 1 over every line of the file, blank ones included. */
  readonly lineNumber: number;
  readonly customId: string;
  readonly method: 'POST';
  readonly url: BatchEndpoint;
  /** The request body exactly as a client would send it to `url`: the gateway call checks its fields. */
  readonly body: Record<string, unknown>;
}

export interface BatchFileLimits {
  /** The longest line, in bytes: a line is a request body, so the JSON body limit (`server.bodyLimitBytes`). */
  readonly maxLineBytes: number;
  /** The most requests a file may hold (`plugins.files.maxBatchRequests`). */
  readonly maxRequests: number;
}

const LINE_FIELDS = new Set(['custom_id', 'method', 'url', 'body']);

/** 400 `invalid_batch_file` about one line, `param` the upload's `file` field. */
export function badLine(lineNumber: number, problem: string): ApiError {
  return new ApiError('invalid_batch_file', `Line ${lineNumber} of the batch file: ${problem}`, { param: 'file' });
}

const isObject = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value);

/**
 * As the HTTP JSON parser refuses them (core/http/json-body-parser.ts): a `__proto__` key, or a
 * `constructor` holding `prototype`, which would poison an object the body is later merged into.
 */
function refusePoisonedKeys(key: string, value: unknown): unknown {
  if (key === '__proto__' || (key === 'constructor' && isObject(value) && Object.hasOwn(value, 'prototype'))) {
    throw new SyntaxError(`the key "${key}" is not allowed`);
  }
  return value;
}

/**
 * One line of a batch file (without its line break) as a request, or 400 `invalid_batch_file`
 * naming `lineNumber` and what is wrong: not JSON, not an object, an unknown field, a `custom_id` that
 * is not a non-empty string of at most 512 characters, a `method` other than `POST`, a `url` that
 * is not a batchable endpoint, a `body` missing, not an object, nested too deep, or asking to stream.
 * Uniqueness of `custom_id` is the file's rule: `BatchFileReader` checks it.
 */
export function parseBatchLine(line: string, lineNumber: number): BatchRequestLine {
  let value: unknown;
  try {
    // The reviver only where the line could hold such a key: it slows parsing down.
    value = line.includes('__proto__') || line.includes('constructor') ? JSON.parse(line, refusePoisonedKeys) : JSON.parse(line);
  } catch (error) {
    throw badLine(lineNumber, `not valid JSON (${(error as Error).message})`);
  }
  if (!isObject(value)) throw badLine(lineNumber, 'not a JSON object');
  const unknown = Object.keys(value).find((field) => !LINE_FIELDS.has(field));
  if (unknown !== undefined) throw badLine(lineNumber, `unknown field "${unknown}"; a line has custom_id, method, url and body`);
  const { custom_id: customId, method, url, body } = value;
  if (typeof customId !== 'string' || customId.length === 0) throw badLine(lineNumber, 'custom_id must be a non-empty string');
  if (customId.length > MAX_CUSTOM_ID_LENGTH) throw badLine(lineNumber, `custom_id is longer than ${MAX_CUSTOM_ID_LENGTH} characters`);
  if (customId.includes('\u0000')) throw badLine(lineNumber, 'custom_id holds the NUL character (U+0000)');
  if (method !== 'POST') throw badLine(lineNumber, `method must be "POST"${method === undefined ? ' (it is missing)' : ''}`);
  if (!(BATCH_ENDPOINTS as readonly unknown[]).includes(url)) {
    const given = typeof url === 'string' ? `"${url.slice(0, 100)}" is not` : url === undefined ? 'url is missing; it must be' : 'url must be';
    throw badLine(lineNumber, `${given} one of the batchable endpoints: ${BATCH_ENDPOINTS.join(', ')}`);
  }
  if (body === undefined) throw badLine(lineNumber, 'body is missing: the request body to send to url');
  if (!isObject(body)) throw badLine(lineNumber, 'body must be a JSON object');
  const deep = fieldNestedTooDeep(body);
  if (deep !== undefined) throw badLine(lineNumber, `body.${deep} nests arrays and objects more than ${MAX_JSON_DEPTH} levels deep`);
  if (body.stream === true) throw badLine(lineNumber, 'body.stream is true; a batch request cannot stream');
  return { lineNumber, customId, method, url: url as BatchEndpoint, body };
}

/**
 * Reads a batch file as its bytes arrive, with bounded memory (one line at a time): `push` each
 * chunk, then `end`. Each returns the requests of the lines it completed and throws 400
 * `invalid_batch_file` at the first bad one: a line that is not UTF-8, longer than the limit,
 * refused by `parseBatchLine`, reusing an earlier line's `custom_id`, or one request too many; and
 * at `end`, a file with no request. Lines end in `\n` or `\r\n`; blank lines are skipped.
 */
export class BatchFileReader {
  private pending: Buffer[] = [];
  private pendingBytes = 0;
  private lineNumber = 0;
  /** By custom_id, the line that used it first. */
  private readonly seen = new Map<string, number>();
  private readonly decoder = new TextDecoder('utf-8', { fatal: true });

  constructor(private readonly limits: BatchFileLimits) {}

  /** Requests read so far. */
  get requests(): number {
    return this.seen.size;
  }

  push(chunk: Uint8Array): BatchRequestLine[] {
    const requests: BatchRequestLine[] = [];
    let start = 0;
    for (;;) {
      const newline = chunk.indexOf(0x0a, start);
      if (newline === -1) {
        this.keep(chunk.subarray(start));
        return requests;
      }
      this.keep(chunk.subarray(start, newline));
      const request = this.takeLine();
      if (request) requests.push(request);
      start = newline + 1;
    }
  }

  end(): BatchRequestLine[] {
    const last = this.pendingBytes > 0 ? this.takeLine() : null;
    if (this.seen.size === 0) throw new ApiError('invalid_batch_file', 'The batch file holds no requests: one JSON request per line', { param: 'file' });
    return last ? [last] : [];
  }

  private keep(bytes: Uint8Array): void {
    if (bytes.length === 0) return;
    this.pendingBytes += bytes.length;
    if (this.pendingBytes > this.limits.maxLineBytes) throw badLine(this.lineNumber + 1, `longer than ${describeBytes(this.limits.maxLineBytes)}, the largest request body`);
    // A copy: the chunk's memory belongs to whoever produced it.
    this.pending.push(Buffer.from(bytes));
  }

  private takeLine(): BatchRequestLine | null {
    this.lineNumber += 1;
    const bytes = this.pending.length === 1 ? this.pending[0]! : Buffer.concat(this.pending, this.pendingBytes);
    this.pending = [];
    this.pendingBytes = 0;
    let text: string;
    try {
      text = this.decoder.decode(bytes);
    } catch {
      throw badLine(this.lineNumber, 'not valid UTF-8');
    }
    if (text.endsWith('\r')) text = text.slice(0, -1);
    if (text.trim() === '') return null;
    const request = parseBatchLine(text, this.lineNumber);
    const earlier = this.seen.get(request.customId);
    if (earlier !== undefined) throw badLine(this.lineNumber, `custom_id "${request.customId.slice(0, 100)}" is already used on line ${earlier}`);
    if (this.seen.size >= this.limits.maxRequests) {
      throw new ApiError('invalid_batch_file', `The batch file holds more than ${this.limits.maxRequests} requests (line ${this.lineNumber})`, { param: 'file' });
    }
    this.seen.set(request.customId, this.lineNumber);
    return request;
  }
}

/** The requests of a batch file's bytes, checked as `BatchFileReader` does, as they are read. */
export async function* readBatchLines(content: AsyncIterable<Uint8Array>, limits: BatchFileLimits): AsyncGenerator<BatchRequestLine> {
  const reader = new BatchFileReader(limits);
  for await (const chunk of content) yield* reader.push(chunk);
  yield* reader.end();
}

/**
 * The check of an upload whose purpose may arrive after its file (OpenAI's SDK sends `file` first):
 * `pass` hands the bytes on unchanged while a reader checks them. With `failFast` (the purpose is
 * known to be `batch` already) the first problem fails the stream, so nothing is stored; otherwise
 * it is kept as `problem`, checking stops, and the caller decides once it knows the purpose.
 */
export class BatchUploadCheck {
  problem: ApiError | null = null;
  private readonly reader: BatchFileReader;

  constructor(
    limits: BatchFileLimits,
    private readonly failFast: boolean,
  ) {
    this.reader = new BatchFileReader(limits);
  }

  async *pass(body: AsyncIterable<Uint8Array>): AsyncGenerator<Uint8Array> {
    for await (const chunk of body) {
      this.check(() => this.reader.push(chunk));
      yield chunk;
    }
    this.check(() => this.reader.end());
  }

  private check(step: () => unknown): void {
    if (this.problem) return;
    try {
      step();
    } catch (error) {
      this.problem = error instanceof ApiError ? error : new ApiError('invalid_batch_file', `The batch file could not be read: ${(error as Error).message}`, { param: 'file' });
      if (this.failFast) throw this.problem;
    }
  }
}
