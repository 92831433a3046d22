import type { FastifyBaseLogger } from 'fastify';
import type { Credential } from '../identity/credential.ts';
import type { OperationEvents } from './operation-events.ts';
import type { AnyOperation, OperationRegistry, RawInput } from './operations.ts';

/** An operation's input as a surface received it, before validation. */
export type RawOperationInput = RawInput;

/** Who calls, from where, under which request id, logging where. */
export interface OperationCaller {
  credential: Credential;
  requestId: string;
  logger: FastifyBaseLogger;
  /**
   * The client's address as the server sees it (behind a trusted proxy, the forwarded one); absent
   * when code runs an operation for itself.
   */
  clientAddress?: string;
  /** The origin the caller reached the service at (core/http/request-origin.ts); absent off HTTP. */
  origin?: string;
}

/**
 * Running a management operation, whatever the surface (the /client and /platform/v1 routes,
 * the /mcp tools): authorize and run it through the registry (scope, owner-only, input, declared
 * resources, handler, output), and record the outcome of a write as a `management.operation` event
 * (the audit log's source). A surface translates its own input and answer; nothing else.
 */
export class OperationService {
  constructor(
    private readonly registry: OperationRegistry,
    private readonly recorder: OperationEvents,
  ) {}

  /** The operation's result; throws its refusal or failure (an ApiError, or what errorAnswer maps). */
  async call(operation: AnyOperation, raw: RawOperationInput, caller: OperationCaller): Promise<unknown> {
    const recording = this.recorder.begin(operation, caller.credential, caller.requestId, raw.params);
    let result: unknown;
    try {
      result = await this.registry.run(operation, raw, { ...caller, transaction: recording.transaction });
    } catch (error) {
      await recording.failed(error);
      throw error;
    }
    await recording.succeeded(result);
    return result;
  }
}
