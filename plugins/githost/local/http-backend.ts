import { PassThrough, pipeline, type Readable, Transform, type TransformCallback } from 'node:stream';
import { createGunzip } from 'node:zlib';
import { gitEnvironment, killGroup, NO_HOOKS, spawnGit } from '../git-process.ts';

/**
 * A bridge to `git http-backend`, git's own smart HTTP server, run as a CGI program: the request's
 * method, path and query go in as CGI variables, its body (inflated here when git sent it gzipped,
 * and counted against the cap either way) on stdin; its stdout is CGI headers (`Status:`,
 * `Content-Type:`…), a blank line, then the body, streamed to the client as it comes.
 */
export interface CgiRequest {
  /** GIT_PROJECT_ROOT: the organisation's folder. */
  projectRoot: string;
  /** PATH_INFO: `/<name>.git/info/refs`, `/<name>.git/git-receive-pack`… */
  pathInfo: string;
  method: 'GET' | 'POST';
  queryString: string;
  contentType: string | undefined;
  /** `gzip` when git compressed the body. */
  contentEncoding: string | undefined;
  body: Readable | null;
  /** REMOTE_USER: who the server authenticated (the key's id); http-backend needs one to take a push. */
  remoteUser: string;
  /** Most request body bytes taken, after inflating. */
  maxBodyBytes: number;
  timeoutMs: number;
  /** The client went away. */
  signal: AbortSignal;
}

export interface CgiResponse {
  status: number;
  headers: Record<string, string>;
  body: Readable;
  /** Settles when git has exited: resolves on success, rejects with why it did not (cap, timeout, abort, exit code). */
  exited: Promise<void>;
}

export class CgiFailure extends Error {
  constructor(
    readonly reason: 'too_large' | 'timeout' | 'aborted' | 'exit' | 'protocol',
    message: string,
  ) {
    super(message);
    this.name = 'CgiFailure';
  }
}

/** Largest CGI header block http-backend writes is a few hundred bytes; more is not git talking. */
const MAX_HEADER_BYTES = 16 * 1024;

/** Counts bytes through it and fails past a cap. */
class ByteCap extends Transform {
  private seen = 0;
  constructor(
    private readonly cap: number,
    private readonly what: string,
  ) {
    super();
  }
  override _transform(chunk: Buffer, _encoding: BufferEncoding, callback: TransformCallback): void {
    this.seen += chunk.length;
    if (this.seen > this.cap) callback(new CgiFailure('too_large', `${this.what} is larger than the ${this.cap} byte limit`));
    else callback(null, chunk);
  }
}

export function runHttpBackend(request: CgiRequest): Promise<CgiResponse> {
  const env = gitEnvironment({
    GIT_PROJECT_ROOT: request.projectRoot,
    GIT_HTTP_EXPORT_ALL: '1',
    PATH_INFO: request.pathInfo,
    REMOTE_USER: request.remoteUser,
    REMOTE_ADDR: '127.0.0.1',
    REQUEST_METHOD: request.method,
    QUERY_STRING: request.queryString,
    CONTENT_TYPE: request.contentType ?? '',
    // The body is inflated here, so git reads plain bytes to EOF: no CONTENT_LENGTH, no encoding.
    GIT_HTTP_MAX_REQUEST_BUFFER: String(request.maxBodyBytes),
  });
  const child = spawnGit([...NO_HOOKS, 'http-backend'], { env });
  let failure: CgiFailure | null = null;
  const fail = (error: CgiFailure) => {
    failure ??= error;
    killGroup(child);
  };
  const timer = setTimeout(() => fail(new CgiFailure('timeout', `git took longer than ${request.timeoutMs} ms`)), request.timeoutMs);
  const onAbort = () => fail(new CgiFailure('aborted', 'the client went away'));
  if (request.signal.aborted) onAbort();
  else request.signal.addEventListener('abort', onAbort, { once: true });

  const exited = new Promise<void>((resolve, reject) => {
    child.on('error', (error) => fail(new CgiFailure('exit', `git http-backend could not start: ${error.message}`)));
    child.on('close', (code) => {
      clearTimeout(timer);
      request.signal.removeEventListener('abort', onAbort);
      if (failure) reject(failure);
      else if (code !== 0) reject(new CgiFailure('exit', `git http-backend exited with ${code}`));
      else resolve();
    });
  });
  exited.catch(() => undefined);

  // The request body: inflated when gzipped, capped after inflating (a small gzip can be a bomb).
  const stdin = child.stdin as NonNullable<typeof child.stdin>;
  stdin.on('error', () => undefined); // git closing its stdin early (a refused request) is not ours to report
  if (request.body) {
    const stages: NodeJS.ReadWriteStream[] = [new ByteCap(request.maxBodyBytes, 'The request body')];
    if (request.contentEncoding === 'gzip') stages.push(createGunzip(), new ByteCap(request.maxBodyBytes, 'The inflated request body'));
    pipeline([request.body, ...stages, stdin], (error) => {
      if (error) fail(error instanceof CgiFailure ? error : new CgiFailure('protocol', `reading the request body failed: ${error.message}`));
    });
  } else {
    stdin.end();
  }
  (child.stderr as NonNullable<typeof child.stderr>).resume();

  return new Promise<CgiResponse>((resolve, reject) => {
    const stdout = child.stdout as NonNullable<typeof child.stdout>;
    let head = Buffer.alloc(0);
    const onData = (chunk: Buffer) => {
      head = Buffer.concat([head, chunk]);
      const end = headerEnd(head);
      if (end === null) {
        if (head.length > MAX_HEADER_BYTES) fail(new CgiFailure('protocol', 'git http-backend wrote no end of headers'));
        return;
      }
      stdout.off('data', onData);
      stdout.off('end', onEnd);
      stdout.pause();
      const parsed = parseCgiHeaders(head.subarray(0, end.at).toString('latin1'));
      const body = new PassThrough();
      const rest = head.subarray(end.at + end.length);
      if (rest.length > 0) body.write(rest);
      stdout.pipe(body);
      resolve({ ...parsed, body, exited });
    };
    const onEnd = () => {
      exited.then(
        () => reject(new CgiFailure('protocol', 'git http-backend answered nothing')),
        (error: unknown) => reject(error),
      );
    };
    stdout.on('data', onData);
    stdout.on('end', onEnd);
  });
}

function headerEnd(buffer: Buffer): { at: number; length: number } | null {
  const crlf = buffer.indexOf('\r\n\r\n');
  const lf = buffer.indexOf('\n\n');
  if (crlf === -1 && lf === -1) return null;
  if (lf === -1 || (crlf !== -1 && crlf < lf)) return { at: crlf, length: 4 };
  return { at: lf, length: 2 };
}

/** CGI response headers: `Status: 404 Not Found` is the status; the rest pass through, lowercased. */
export function parseCgiHeaders(text: string): { status: number; headers: Record<string, string> } {
  let status = 200;
  const headers: Record<string, string> = {};
  for (const line of text.split(/\r?\n/)) {
    const colon = line.indexOf(':');
    if (colon <= 0) continue;
    const name = line.slice(0, colon).trim().toLowerCase();
    const value = line.slice(colon + 1).trim();
    if (name === 'status') {
      const code = Number.parseInt(value, 10);
      if (code >= 100 && code <= 599) status = code;
    } else if (/^[a-z0-9-]+$/.test(name)) {
      headers[name] = value;
    }
  }
  return { status, headers };
}
