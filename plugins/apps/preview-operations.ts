import http from 'node:http';
import { z } from 'zod';
import { authorizedRecord } from '../../core/identity/authorization.ts';
import { visibleProjectIds } from '../../core/identity/project-access.ts';
import { type AnyOperation, defineOperation } from '../../core/operations/operations.ts';
import { appRecordKind, type AppsOperationDeps } from './apps-operations.ts';
import type { AppRecord } from './apps-store.ts';

export interface PreviewOperationDeps extends AppsOperationDeps {
  /** `<slug>.<baseDomain>`: the Host the proxy routes the app by. */
  hostOf: (slug: string) => string;
  /** The port the apps proxy of this process listens on; null where none runs (a worker). */
  proxyPort: () => number | null;
  previewTimeoutMs?: number;
}

const PREVIEW_MAX_BYTES = 64 * 1024;
const idParams = z.strictObject({ id: z.uuid() });

const previewView = z
  .object({
    object: z.literal('app_preview'),
    appId: z.string(),
    url: z.string().describe('The live URL'),
    status: z.string().describe('The app’s status: deploying, live or failed'),
    page: z
      .object({
        status: z.number().int().describe('What the app answered GET / with, through the apps proxy'),
        contentType: z.string().nullable(),
        title: z.string().nullable().describe('The HTML page’s <title>, when it is one'),
        bytes: z.number().int().describe('Bytes read (at most 64 KiB)'),
        durationMs: z.number().int(),
      })
      .nullable()
      .describe('Null when the page could not be fetched (error says why)'),
    error: z.string().nullable(),
  })
  .meta({ id: 'AppPreview', description: 'The app’s live URL and what its front page answers now' });

const referencesView = z
  .object({
    object: z.literal('list'),
    appId: z.string(),
    data: z.array(
      z.object({
        kind: z.enum(['app_source', 'app_env']).describe('app_source: deploys from the same source; app_env: a variable holds this app’s address'),
        appId: z.string(),
        name: z.string().describe('The referring app’s name'),
        detail: z.string().describe('The repository, URL or template shared, or the variable’s name (never its value)'),
      }),
    ),
  })
  .meta({ id: 'AppReferences', description: 'What refers to this app: other apps sharing its source, or whose variables name its address' });

/** GET / on the app through this process's apps proxy (the hop an outside browser would make). */
function fetchFront(port: number, host: string, timeoutMs: number) {
  return new Promise<{ status: number; contentType: string | null; body: string; durationMs: number }>((resolve, reject) => {
    const started = performance.now();
    const request = http.get({ host: '127.0.0.1', port, path: '/', headers: { host, accept: 'text/html,*/*' }, timeout: timeoutMs }, (response) => {
      const chunks: Buffer[] = [];
      let size = 0;
      const finish = () =>
        resolve({
          status: response.statusCode ?? 0,
          contentType: response.headers['content-type'] ?? null,
          body: Buffer.concat(chunks).toString('utf8'),
          durationMs: Math.round(performance.now() - started),
        });
      response.on('data', (chunk: Buffer) => {
        if (size >= PREVIEW_MAX_BYTES) return;
        chunks.push(chunk.subarray(0, PREVIEW_MAX_BYTES - size));
        size += chunk.length;
        if (size >= PREVIEW_MAX_BYTES) {
          response.destroy();
          finish();
        }
      });
      response.on('end', finish);
      response.on('error', reject);
    });
    request.on('timeout', () => request.destroy(new Error(`no answer within ${timeoutMs} ms`)));
    request.on('error', reject);
  });
}

function titleOf(html: string): string | null {
  const match = /<title[^>]*>([\s\S]*?)<\/title>/i.exec(html);
  return match ? match[1]!.replace(/\s+/g, ' ').trim().slice(0, 300) : null;
}

/** `GET /apps/{id}/preview` and `GET /apps/{id}/referenced-by` (plugins/apps/README.md). */
export function previewOperations(deps: PreviewOperationDeps): AnyOperation[] {
  const appKind = appRecordKind(deps.store);
  const readApp = { kind: appKind, access: 'read', in: 'path', field: 'id' } as const;

  const preview = defineOperation({
    name: 'apps.preview',
    method: 'GET',
    path: '/apps/:id/preview',
    summary: 'The app’s live URL and what its front page answers now (status, title)',
    description: 'GET / is made through the apps proxy, as a browser would; at most 64 KiB is read, within 5 s.',
    scope: null,
    readOnly: true,
    params: idParams,
    resource: readApp,
    output: previewView,
    async handler(_input, { authorization }) {
      const app = authorizedRecord(authorization, appKind).record;
      const base = { object: 'app_preview' as const, appId: app.id, url: deps.urlOf(app.slug), status: app.status };
      const port = deps.proxyPort();
      if (port === null) return { ...base, page: null, error: 'No apps proxy runs in the process that answered (a worker): ask an api process' };
      try {
        const front = await fetchFront(port, deps.hostOf(app.slug), deps.previewTimeoutMs ?? 5_000);
        const html = (front.contentType ?? '').includes('html');
        const page = {
          status: front.status,
          contentType: front.contentType,
          title: html ? titleOf(front.body) : null,
          bytes: Buffer.byteLength(front.body),
          durationMs: front.durationMs,
        };
        return { ...base, page, error: null };
      } catch (error) {
        return { ...base, page: null, error: error instanceof Error ? error.message : String(error) };
      }
    },
  });

  const referencedBy = defineOperation({
    name: 'apps.referenced_by',
    method: 'GET',
    path: '/apps/:id/referenced-by',
    summary: 'What refers to this app: apps deploying from the same source, and apps whose variables hold its address',
    description: 'Among the apps the caller may see. A variable is named, never its value. Domains, scheduled jobs and app keys are ' + 'not kept by this service yet, so none is listed.',
    scope: null,
    readOnly: true,
    params: idParams,
    resource: readApp,
    output: referencesView,
    async handler(_input, { authorization, credential }) {
      const app = authorizedRecord(authorization, appKind).record;
      const visible = await visibleProjectIds(deps.identity, credential);
      const others = (await deps.store.apps(app.organizationId, visible)).filter((other) => other.id !== app.id);
      const data: Array<{ kind: 'app_source' | 'app_env'; appId: string; name: string; detail: string }> = [];
      const shared = new Set((await deps.store.sameSource(app)).map((other) => other.id));
      for (const other of others) {
        if (shared.has(other.id)) data.push({ kind: 'app_source', appId: other.id, name: other.name, detail: sourceName(app) });
      }
      const needles = [deps.hostOf(app.slug).toLowerCase(), deps.urlOf(app.slug).toLowerCase()];
      for (const other of others) {
        for (const service of await deps.store.services(other.id)) {
          const env = await deps.env.read(service.id);
          for (const [name, value] of Object.entries(env)) {
            const lower = value.toLowerCase();
            if (needles.some((needle) => lower.includes(needle))) data.push({ kind: 'app_env', appId: other.id, name: other.name, detail: name });
          }
        }
      }
      return { object: 'list' as const, appId: app.id, data };
    },
  });

  return [preview, referencedBy];
}

function sourceName(app: AppRecord): string {
  if (app.sourceKind === 'url') return app.sourceUrl ?? '';
  if (app.sourceKind === 'template') return `template ${app.sourceRepo}`;
  return `repository ${app.sourceRepo}`;
}
