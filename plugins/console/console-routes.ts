import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { FastifyInstance, FastifyReply } from 'fastify';
import { escapeHtml } from '../../core/http/pages.ts';
import { type Precompressed, precompressed, sendPrecompressed } from '../../core/http/precompressed.ts';
import { ASSET_NAME, ASSETS_FOLDER, type ConsoleManifest, readConsoleManifest } from './console-assets.ts';

/**
 * The console's page under the strictest policy a script-driven page can have: its own script and
 * stylesheet only, fetches to this origin only, no framing, no inline anything. uPlot's canvas
 * needs no exception; `data:` images are for the charts' legend markers.
 */
export const CONSOLE_CSP = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "frame-ancestors 'none'",
  "base-uri 'none'",
  "form-action 'self'",
].join('; ');

const IMMUTABLE = 'public, max-age=31536000, immutable';

function securityHeaders(reply: FastifyReply): FastifyReply {
  return (
    reply
      .header('content-security-policy', CONSOLE_CSP)
      .header('x-content-type-options', 'nosniff')
      .header('x-frame-options', 'DENY')
      // The console sends no referrer anywhere: its URLs (a set-password link's fragment aside) are nobody else's business.
      .header('referrer-policy', 'no-referrer')
  );
}

export function consolePage(manifest: ConsoleManifest): string {
  const script = escapeHtml(`/console/${ASSETS_FOLDER}/${manifest.script}`);
  const stylesheet = escapeHtml(`/console/${ASSETS_FOLDER}/${manifest.stylesheet}`);
  return [
    '<!doctype html>',
    '<html lang="en"><head><meta charset="utf-8">',
    '<meta name="viewport" content="width=device-width, initial-scale=1">',
    '<meta name="color-scheme" content="light dark">',
    '<title>Console</title>',
    `<link rel="stylesheet" href="${stylesheet}">`,
    `<script type="module" src="${script}"></script>`,
    '</head><body><div id="app"></div>',
    '<noscript>The console needs JavaScript; the management API (/client) works without it.</noscript>',
    '</body></html>',
    '',
  ].join('\n');
}

/**
 * `/console/` and every path under it answer the same page (the client routes); assets by hash.
 * The build is read when first asked for and kept: a deployment ships one build, and a missing
 * one answers 503 naming the command that makes it, rather than failing the boot of a service
 * whose console is the least of its parts.
 */
export function mountConsoleRoutes(app: FastifyInstance, dir: string): void {
  let manifest: ConsoleManifest | null = null;
  const current = async () => (manifest ??= await readConsoleManifest(dir));
  // The build's two files, read and gzipped once each (they never change while the build is served).
  const assets = new Map<string, Precompressed>();
  const open = { config: { auth: false as const, surface: 'root' as const } };

  const page = async (_request: unknown, reply: FastifyReply) => {
    const built = await current();
    securityHeaders(reply).header('cache-control', 'no-store');
    if (!built) {
      return reply.code(503).type('text/plain; charset=utf-8').send('The console is not built: run `npm run build` (npm start builds it when missing).\n');
    }
    return reply.type('text/html; charset=utf-8').send(consolePage(built));
  };

  app.get(`/console/${ASSETS_FOLDER}/:file`, open, async (request, reply) => {
    const { file } = request.params as { file: string };
    const built = await current();
    // Only the two files of this build: an old hash after a redeploy is a 404, not a stale script.
    if (!built || !ASSET_NAME.test(file) || (file !== built.script && file !== built.stylesheet)) {
      securityHeaders(reply).header('cache-control', 'no-store');
      return reply.code(404).type('text/plain; charset=utf-8').send('Not found\n');
    }
    let asset = assets.get(file);
    if (!asset) {
      const type = file.endsWith('.js') ? 'text/javascript; charset=utf-8' : 'text/css; charset=utf-8';
      asset = precompressed(await readFile(join(dir, ASSETS_FOLDER, file)), type);
      assets.set(file, asset);
    }
    return sendPrecompressed(request, securityHeaders(reply).header('cache-control', IMMUTABLE), asset);
  });
  // The router ignores trailing slashes: `/console` answers `/console/` as well.
  app.get('/console', open, page);
  app.get('/console/*', open, page);
}
