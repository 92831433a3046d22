import { z } from 'zod';
import { defineEventTypes, type PayloadsOf } from '../events/event-catalogue.ts';
import type { Credential } from '../identity/credential.ts';
import { errorStatus } from '../kernel/error-answer.ts';
import type { DomainEvents } from '../events/domain-events.ts';
import type { AnyOperation } from './operations.ts';
import type { Database, Transaction } from '../ports/database.ts';
import type { EventActor } from '../ports/events.ts';

const httpMethod = z.enum(['GET', 'POST', 'PUT', 'PATCH', 'DELETE']);

const operationPerformed = z.object({
  operation: z.string(),
  method: httpMethod,
  path: z.string().describe("The operation's path template, e.g. `/keys/:id`"),
  params: z.record(z.string(), z.string()).describe("The call's path parameters"),
  targetId: z.string().nullable().describe('The resource acted on: the `id` path parameter (else the last one), or the id of what a create returned'),
  status: z.number().int().describe('The HTTP status answered (for a change committed before a later failure: the success status)'),
  code: z.string().nullable().describe('The error code when it failed'),
  requestId: z.string(),
});

/** Data of `management.operation`: one management call that writes (over HTTP or MCP), whatever its outcome. */
export type OperationPerformed = z.output<typeof operationPerformed>;

const OPERATION_EVENTS = defineEventTypes('core', {
  'management.operation': {
    schema: operationPerformed,
    description: 'A management call that writes was made, over HTTP or MCP, whatever its outcome (the audit log)',
    // The audit log reads it; webhooks see the specific events (key.created and the rest) instead.
    public: false,
    example: {
      operation: 'keys.update',
      method: 'PATCH',
      path: '/keys/:id',
      params: { id: 'key_0123' },
      targetId: 'key_0123',
      status: 200,
      code: null,
      requestId: 'req_0123',
    },
  },
});

declare module '../events/domain-events.ts' {
  interface EventCatalogue extends PayloadsOf<typeof OPERATION_EVENTS> {}
}

/** A connector acts as its person; the credential names the OAuth grant it acts through. */
export function actorOf(credential: Credential): EventActor {
  if (credential.kind === 'session') {
    return { kind: 'person', id: credential.personId, label: credential.email, credential: { kind: 'session', id: credential.sessionId } };
  }
  if (credential.kind === 'connector') {
    return { kind: 'person', id: credential.personId, label: credential.email, credential: { kind: 'connector', id: credential.grantId } };
  }
  return { kind: 'key', id: credential.keyId, label: credential.keyName, credential: { kind: 'key', id: credential.keyId } };
}

/** How one operation call is recorded: the handler's transactions, then its outcome. */
export interface OperationRecording {
  /** Passed to the handler as `ctx.transaction`. */
  transaction<T>(fn: (tx: Transaction) => Promise<T>): Promise<T>;
  succeeded(result: unknown): Promise<void>;
  failed(error: unknown): Promise<void>;
}

/**
 * Every management call that writes (an operation not declared `readOnly`), over HTTP or MCP alike
 * (core/operations/operation-service.ts calls this), emits one `management.operation`
 * event: who (actor and credential), what (operation, target), when, and the outcome. A handler
 * that writes through `ctx.transaction` gets the event in that same transaction, so the change
 * and its record commit or vanish together. A handler that writes without it (most of them
 * today, through stores on the shared pool) is recorded in a transaction of its own right after
 * it returns or throws: if the process dies in between, that change has no record.
 */
export class OperationEvents {
  constructor(
    private readonly database: Database,
    private readonly events: DomainEvents,
    private readonly onRecordFailed: (error: unknown, operation: string) => void,
  ) {}

  begin(operation: AnyOperation, credential: Credential, requestId: string, rawParams: unknown): OperationRecording {
    const database = this.database;
    if (operation.readOnly) {
      return { transaction: (fn) => database.transaction(fn), succeeded: async () => undefined, failed: async () => undefined };
    }
    const params = stringParams(rawParams);
    let recorded = false;
    const emit = (tx: Transaction, outcome: { status: number; code: string | null; result: unknown }) =>
      this.events.emit(tx, {
        type: 'management.operation',
        organizationId: credential.organizationId,
        subject: targetOf(params, outcome.result),
        actor: actorOf(credential),
        data: {
          operation: operation.name,
          method: operation.method,
          path: operation.path,
          params,
          targetId: targetOf(params, outcome.result),
          status: outcome.status,
          code: outcome.code,
          requestId,
        },
      });
    const afterwards = async (outcome: { status: number; code: string | null; result: unknown }) => {
      if (recorded) return;
      recorded = true;
      try {
        await database.transaction((tx) => emit(tx, outcome));
      } catch (error) {
        this.onRecordFailed(error, operation.name);
      }
    };
    return {
      async transaction(fn) {
        const result = await database.transaction(async (tx) => {
          const value = await fn(tx);
          if (!recorded) await emit(tx, { status: operation.status ?? 200, code: null, result: value });
          return value;
        });
        // Set after the commit: a rolled-back transaction recorded nothing.
        recorded = true;
        return result;
      },
      succeeded: (result) => afterwards({ status: operation.status ?? 200, code: null, result }),
      failed: (error) => afterwards({ ...errorStatus(error), result: null }),
    };
  }
}

function stringParams(raw: unknown): Record<string, string> {
  const out: Record<string, string> = {};
  if (raw && typeof raw === 'object') {
    for (const [key, value] of Object.entries(raw)) if (typeof value === 'string') out[key] = value.slice(0, 200);
  }
  return out;
}

function targetOf(params: Record<string, string>, result: unknown): string | null {
  const values = Object.values(params);
  if (params['id'] !== undefined) return params['id'];
  if (values.length > 0) return values[values.length - 1]!;
  const id = result && typeof result === 'object' ? (result as { id?: unknown }).id : undefined;
  return typeof id === 'string' ? id : null;
}
