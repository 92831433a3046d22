import { z } from 'zod';
import { authorizedRecord, type RecordKind } from '../../core/identity/authorization.ts';
import { defineOperation, type AnyOperation, type FollowEvent } from '../../core/operations/operations.ts';
import type { AppsHost } from './apps-host.ts';
import type { AppRecord, ServiceRecord } from './apps-store.ts';
import type { LogLine } from './runtime/index.ts';

/** The most lines a runtime log answer holds (the newest). */
export const RUNTIME_LOG_LINES = 1000;

export const followQuery = z.strictObject({
  follow: z.enum(['0', '1']).optional().describe('1: answer server-sent events (`snapshot`, then `line` per new line, `end`) instead of one JSON answer'),
});

export const runtimeLogLine = z.object({
  at: z.string(),
  deploymentId: z.string(),
  stream: z.enum(['stdout', 'stderr', 'runtime']),
  line: z.string(),
});

export const runtimeLogView = z
  .object({
    object: z.literal('list'),
    serviceId: z.string(),
    data: z.array(runtimeLogLine),
  })
  .meta({ id: 'ServiceLogLines', description: 'What the running app printed, oldest first (the last 1000 lines)' });

/** The service's newest lines (at most RUNTIME_LOG_LINES), oldest first. */
export async function lastRuntimeLines(host: AppsHost, serviceId: string, since?: Date): Promise<LogLine[]> {
  const lines: LogLine[] = [];
  for await (const line of host.runtime().logs(serviceId, since ? { since } : {})) {
    lines.push(line);
    if (lines.length > RUNTIME_LOG_LINES) lines.shift();
  }
  return lines;
}

/**
 * New lines after a snapshot, until the reader goes away: read from the snapshot's last instant on,
 * skipping the lines of that instant the snapshot already held.
 */
export async function* followRuntimeLog(host: AppsHost, serviceId: string, snapshot: readonly LogLine[], signal: AbortSignal): AsyncGenerator<FollowEvent> {
  const last = snapshot.at(-1);
  let skip = last ? snapshot.filter((line) => line.at === last.at).length : 0;
  const options = { follow: true, signal, ...(last ? { since: new Date(last.at) } : { since: new Date() }) };
  for await (const line of host.runtime().logs(serviceId, options)) {
    if (last && line.at === last.at && skip > 0) {
      skip--;
      continue;
    }
    yield { event: 'line', data: line };
  }
}

export interface LogOperationDeps {
  host: AppsHost;
  serviceKind: RecordKind<{ app: AppRecord; service: ServiceRecord }>;
}

/**
 * `POST /services/{id}/logs/refresh`: the runtime's log of the service starts a fresh file (the lines
 * so far move to the older generations, still read by GET .../logs; the oldest generation is
 * dropped), and the answer is the newest lines, as GET .../logs gives them. For a person who wants
 * a clean page before reproducing something; a write (the oldest generation goes), so `apps:deploy`.
 */
export function logOperations(deps: LogOperationDeps): AnyOperation[] {
  const { host, serviceKind } = deps;
  const refresh = defineOperation({
    name: 'services.logs.refresh',
    method: 'POST',
    path: '/services/:id/logs/refresh',
    summary: 'Start the service’s runtime log afresh (rotate it) and answer its newest lines',
    description: 'Earlier lines stay readable in the rotated files (GET /services/{id}/logs reads them); the oldest rotated file is dropped.',
    scope: 'apps:deploy',
    readOnly: false,
    params: z.strictObject({ id: z.uuid() }),
    resource: { kind: serviceKind, access: 'write', in: 'path', field: 'id' },
    output: runtimeLogView,
    errors: ['runtime_unavailable_here'],
    async handler(_input, { authorization }) {
      const { service } = authorizedRecord(authorization, serviceKind).record;
      const runtime = host.runtime();
      runtime.rotateLogs(service.id);
      return { object: 'list' as const, serviceId: service.id, data: await lastRuntimeLines(host, service.id) };
    },
  });
  return [refresh];
}
