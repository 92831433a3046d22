import type { z } from 'zod';
import type { QueueSpec } from '../../core/jobs/queue-definitions.ts';
import type { Database, Migration, Queryable } from '../../core/ports/database.ts';
import { SupportDesk } from './support-desk.ts';
import { supportMigrations } from './support-migrations.ts';
import { SUPPORT_STATUSES, type SupportMessage, type SupportRequest, SupportStore, type SupportStatus } from './support-store.ts';

export const SUPPORT_USAGE = `  npm run cli -- support list [--status open|answered|solved|all] [--limit N]
                                                         requests waiting longest first (default: open, waiting on support)
  npm run cli -- support show --request ID               a request with every message and attachment
  npm run cli -- support reply --request ID --message TEXT [--as NAME]
                                                         answer as support (NAME, default "Support"); the requester is mailed
  npm run cli -- support solve --request ID [--as NAME]  mark it solved on support's side
`;

/** What the support commands need of the operator's storage (composition/operator-storage.ts). */
export interface SupportCliStorage {
  db: Database;
  migrate(migrations: readonly Migration[]): Promise<void>;
  enqueue<S extends z.ZodType>(db: Queryable, queue: QueueSpec<S>, payload: z.input<S>): Promise<void>;
}

export interface SupportCliOptions {
  request?: string | undefined;
  message?: string | undefined;
  as?: string | undefined;
  status?: string | undefined;
  limit?: string | undefined;
}

/** A command's mistake, for the CLI to show with its usage. */
export class SupportCliUsageError extends Error {}

/** Runs `support <verb>`; returns the exit code. */
export async function runSupportCommand(verb: string | undefined, options: SupportCliOptions, storage: SupportCliStorage, out: (text: string) => void): Promise<number> {
  await storage.migrate(supportMigrations);
  const desk = new SupportDesk({ db: storage.db, store: new SupportStore(storage.db), enqueue: storage.enqueue, clock: () => new Date() });
  const request = () => {
    if (!options.request) throw new SupportCliUsageError('missing --request');
    return options.request;
  };
  const operator = options.as?.trim() || 'Support';
  switch (verb) {
    case 'list': {
      const status = (options.status ?? 'open') as SupportStatus | 'all';
      if (status !== 'all' && !SUPPORT_STATUSES.includes(status)) throw new SupportCliUsageError(`--status must be one of ${SUPPORT_STATUSES.join(', ')}, all`);
      const limit = Number(options.limit ?? 50);
      if (!Number.isInteger(limit) || limit < 1 || limit > 1000) throw new SupportCliUsageError('--limit must be a whole number from 1 to 1000');
      const requests = await desk.list({ status, limit });
      for (const item of requests) out(`${item.id}  ${item.status.padEnd(8)}  ${item.lastMessageAt.toISOString()}  ${item.requester.email}  ${item.subject}\n`);
      if (requests.length === 0) out('no requests\n');
      return 0;
    }
    case 'show': {
      const found = await desk.show(request());
      if (!found) return notFound(request(), out);
      out(describe(found.request, found.messages));
      return 0;
    }
    case 'reply': {
      if (!options.message?.trim()) throw new SupportCliUsageError('missing --message');
      const replied = await desk.reply({ requestId: request(), body: options.message, operator });
      if (!replied) return notFound(request(), out);
      out(`answered ${request()} as ${operator} (message ${replied.messageId}); the requester is mailed when the service runs its workers\n`);
      return 0;
    }
    case 'solve': {
      const solved = await desk.solve({ requestId: request(), operator });
      if (solved === null) return notFound(request(), out);
      out(solved ? `solved ${request()}\n` : `${request()} was solved already\n`);
      return 0;
    }
    default:
      throw new SupportCliUsageError(`unknown command "support ${verb ?? ''}"`);
  }
}

function notFound(id: string, out: (text: string) => void): number {
  out(`no support request ${id}\n`);
  return 1;
}

function describe(request: SupportRequest, messages: readonly SupportMessage[]): string {
  const lines = [
    `${request.subject}`,
    `request ${request.id}  ${request.status}  organisation ${request.organizationId}`,
    `from ${request.requester.name} <${request.requester.email}>, opened ${request.createdAt.toISOString()}`,
  ];
  for (const message of messages) {
    const who = message.author.kind === 'support' ? `${message.author.name} (support)` : message.author.name;
    lines.push('', `--- ${who}, ${message.createdAt.toISOString()}`, message.body);
    for (const file of message.attachments) lines.push(`    [attachment ${file.id}] ${file.filename} (${file.contentType}, ${file.size} bytes)`);
  }
  return `${lines.join('\n')}\n`;
}
