// The hosting runtime's static file server: what serves an app the build decision calls static
// (`static_file_server`). Plain JavaScript with no dependency, because it runs under the system's
// node inside the app's sandbox (or pod), copied into the artifact beside the site's folder, where
// nothing of this repository is installed. Its rules are in README.md ("Static sites").
//
//   PORT=8080 node static-server.mjs --root site [--host 127.0.0.1] [--spa 200.html] [--not-found 404.html]
import { createReadStream } from 'node:fs';
import { realpath, stat } from 'node:fs/promises';
import http from 'node:http';
import path from 'node:path';
import { parseArgs } from 'node:util';

/** Content types by extension; anything else is application/octet-stream (with nosniff, never guessed). */
const CONTENT_TYPES = {
  '.html': 'text/html; charset=utf-8',
  '.htm': 'text/html; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.json': 'application/json; charset=utf-8',
  '.map': 'application/json; charset=utf-8',
  '.webmanifest': 'application/manifest+json; charset=utf-8',
  '.txt': 'text/plain; charset=utf-8',
  '.md': 'text/markdown; charset=utf-8',
  '.csv': 'text/csv; charset=utf-8',
  '.xml': 'application/xml; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.jpg': 'image/jpeg',
  '.jpeg': 'image/jpeg',
  '.gif': 'image/gif',
  '.webp': 'image/webp',
  '.avif': 'image/avif',
  '.ico': 'image/x-icon',
  '.woff': 'font/woff',
  '.woff2': 'font/woff2',
  '.ttf': 'font/ttf',
  '.otf': 'font/otf',
  '.wasm': 'application/wasm',
  '.pdf': 'application/pdf',
  '.mp4': 'video/mp4',
  '.webm': 'video/webm',
  '.mp3': 'audio/mpeg',
  '.ogg': 'audio/ogg',
  '.wav': 'audio/wav',
  '.zip': 'application/zip',
};

/** A page of its own for each error status: short, and saying no more than the status does. */
function page(status, text) {
  const heading = `${status} ${text}`;
  return `<!doctype html>\n<meta charset="utf-8">\n<title>${heading}</title>\n<h1>${heading}</h1>\n`;
}
const NOT_FOUND_PAGE = page(404, 'Not Found');

const contentTypeOf = (file) => CONTENT_TYPES[path.extname(file).toLowerCase()] ?? 'application/octet-stream';

/** Weak: size and modification time name the version (the artifact is read-only, so both hold for its life). */
const etagOf = (info) => `W/"${info.size.toString(16)}-${Math.floor(info.mtimeMs).toString(16)}"`;

/**
 * The request's path as segments, or null when it is no path a file could have: undecodable, a
 * NUL, an encoded `/` or `\\` inside a segment. Decoded by hand, never by URL normalisation, so
 * `%2e%2e` is judged as the `..` it decodes to (by `hidden`).
 */
function segmentsOf(rawUrl) {
  const rawPath = rawUrl.split('?')[0].split('#')[0];
  if (!rawPath.startsWith('/')) return null;
  const segments = [];
  for (const raw of rawPath.split('/')) {
    let segment;
    try {
      segment = decodeURIComponent(raw);
    } catch {
      return null;
    }
    if (segment.includes('\0') || segment.includes('/') || segment.includes('\\')) return null;
    if (segment === '') continue;
    segments.push(segment);
  }
  return segments;
}

/** `.`, `..` and other dot-names (`.env`, `.htpasswd`) are never served, `.well-known` aside: as if absent. */
const hidden = (segments) => segments.some((segment) => segment.startsWith('.') && segment !== '.well-known');

/** Whether `file` (a real path) is the root or below it. */
const within = (root, file) => file === root || file.startsWith(root + path.sep);

/**
 * Finds what a path names: a file, a folder's index.html, or nothing. Symlinks are followed only
 * while their target stays below the root's real path: one pointing outside is as missing.
 */
async function resolveFile(root, segments) {
  const candidate = path.join(root, ...segments);
  if (!within(root, candidate)) return { kind: 'missing' };
  let real;
  try {
    real = await realpath(candidate);
  } catch {
    return { kind: 'missing' };
  }
  if (!within(root, real)) return { kind: 'missing' };
  const info = await stat(real);
  if (info.isDirectory()) {
    const index = await resolveFile(root, [...segments, 'index.html']);
    return index.kind === 'file' ? { ...index, directory: true } : { kind: 'missing' };
  }
  return info.isFile() ? { kind: 'file', file: real, info, directory: false } : { kind: 'missing' };
}

/** 304 when the client's copy is current: If-None-Match first, If-Modified-Since only without it (RFC 9110 §13.2.2). */
function notModified(request, info, etag) {
  const match = request.headers['if-none-match'];
  if (match !== undefined) {
    const strip = (tag) => tag.trim().replace(/^W\//, '');
    return match.trim() === '*' || match.split(',').some((tag) => strip(tag) === strip(etag));
  }
  const since = Date.parse(request.headers['if-modified-since'] ?? '');
  return !Number.isNaN(since) && Math.floor(info.mtimeMs / 1000) * 1000 <= since;
}

function sendFile(request, response, found, status) {
  const etag = etagOf(found.info);
  const headers = {
    'Content-Type': contentTypeOf(found.file),
    ETag: etag,
    'Last-Modified': found.info.mtime.toUTCString(),
    // Revalidated every time: cheap with the ETag, and a new deploy is seen at once.
    'Cache-Control': 'no-cache',
    'X-Content-Type-Options': 'nosniff',
  };
  if (status === 200 && notModified(request, found.info, etag)) {
    response.writeHead(304, headers).end();
    return;
  }
  response.writeHead(status, { ...headers, 'Content-Length': found.info.size });
  if (request.method === 'HEAD') {
    response.end();
    return;
  }
  createReadStream(found.file)
    .on('error', () => response.destroy())
    .pipe(response);
}

function sendPage(request, response, status, body, extra = {}) {
  const headers = {
    'Content-Type': 'text/html; charset=utf-8',
    'Content-Length': Buffer.byteLength(body),
    'X-Content-Type-Options': 'nosniff',
    ...extra,
  };
  response.writeHead(status, headers).end(request.method === 'HEAD' ? undefined : body);
}

/**
 * The handler over a root folder. `spa`: a file below the root answered (200) for paths that name
 * no file and whose last segment has no extension (a client-side route; a missing `app.js` stays a
 * 404). `notFound`: a file below the root answered with status 404 instead of the built-in page.
 */
async function staticHandler({ root, spa = null, notFound = null }) {
  const realRoot = await realpath(root);
  const named = async (name) => {
    if (name === null) return null;
    const segments = segmentsOf(`/${name}`);
    const found = segments === null || hidden(segments) ? { kind: 'missing' } : await resolveFile(realRoot, segments);
    if (found.kind !== 'file') throw new Error(`${name} is not a file in ${root}`);
    return found;
  };
  const spaFile = await named(spa);
  const notFoundFile = await named(notFound);
  return async (request, response) => {
    if (request.method !== 'GET' && request.method !== 'HEAD') {
      sendPage(request, response, 405, page(405, 'Method Not Allowed'), { Allow: 'GET, HEAD' });
      return;
    }
    const segments = segmentsOf(request.url ?? '/');
    if (segments === null) {
      sendPage(request, response, 400, page(400, 'Bad Request'));
      return;
    }
    try {
      const found = hidden(segments) ? { kind: 'missing' } : await resolveFile(realRoot, segments);
      if (found.kind === 'file') {
        // A folder asked for without its slash: relative links in its index.html need the slash.
        // Made from the decoded segments, never the raw path: `//host` must not become an address elsewhere.
        const rawPath = (request.url ?? '/').split('?')[0];
        if (found.directory && !rawPath.endsWith('/')) {
          const query = (request.url ?? '').slice(rawPath.length);
          sendPage(request, response, 301, '', { Location: `/${segments.map(encodeURIComponent).join('/')}/${query}` });
          return;
        }
        sendFile(request, response, found, 200);
        return;
      }
      const last = segments.at(-1) ?? '';
      if (spaFile !== null && path.extname(last) === '') {
        sendFile(request, response, { ...spaFile, info: await stat(spaFile.file) }, 200);
        return;
      }
      if (notFoundFile !== null) {
        sendFile(request, response, { ...notFoundFile, info: await stat(notFoundFile.file) }, 404);
        return;
      }
      sendPage(request, response, 404, NOT_FOUND_PAGE);
    } catch (error) {
      const reason = error instanceof Error ? error.message : String(error);
      process.stderr.write(`static server: ${request.url}: ${reason}\n`);
      if (!response.headersSent) sendPage(request, response, 500, page(500, 'Internal Server Error'));
      else response.destroy();
    }
  };
}

async function main() {
  const { values } = parseArgs({
    options: {
      root: { type: 'string', default: 'site' },
      host: { type: 'string', default: '127.0.0.1' },
      spa: { type: 'string' },
      'not-found': { type: 'string' },
    },
  });
  const port = Number(process.env.PORT);
  if (!Number.isInteger(port) || port < 0 || port > 65_535) throw new Error('PORT must be a port number');
  const root = path.resolve(values.root);
  const handler = await staticHandler({ root, spa: values.spa ?? null, notFound: values['not-found'] ?? null });
  const server = http.createServer((request, response) => void handler(request, response));
  server.listen(port, values.host, () => {
    process.stdout.write(`static files of ${values.root} served on ${values.host}:${server.address().port}\n`);
  });
  // Closing on SIGTERM lets the requests in flight finish: a swap to a new deploy loses none.
  process.once('SIGTERM', () => server.close(() => process.exit(0)));
}

await main().catch((error) => {
  process.stderr.write(`static server: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
});
