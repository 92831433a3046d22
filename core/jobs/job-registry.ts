import { z } from 'zod';
import { defineQueue, type PeriodicDefinition, type QueueDefinition } from './queue-definitions.ts';

/** Queue names the kernel makes for periodic jobs and event subscribers; plugins cannot take them. */
export const PERIODIC_QUEUE_PREFIX = 'periodic.';
export const SUBSCRIBER_QUEUE_PREFIX = 'event.';

export interface RegisteredPeriodic {
  readonly name: string;
  readonly everyMs: number;
  readonly queue: string;
  readonly maxAttempts: number;
}

/** Every queue with a handler and every periodic job the enabled plugins (and the kernel) declared. */
export class JobRegistry {
  private readonly handlers = new Map<string, QueueDefinition>();
  private readonly periodicJobs: RegisteredPeriodic[] = [];

  /** A plugin's queue; `kernel` lets the kernel use its reserved prefixes. */
  addQueue(definition: QueueDefinition, options: { kernel?: boolean } = {}): void {
    const { name } = definition.spec;
    if (!options.kernel && (name.startsWith(PERIODIC_QUEUE_PREFIX) || name.startsWith(SUBSCRIBER_QUEUE_PREFIX))) {
      throw new Error(`queue ${name}: names starting with '${PERIODIC_QUEUE_PREFIX}' or '${SUBSCRIBER_QUEUE_PREFIX}' are the kernel's`);
    }
    if (this.handlers.has(name)) throw new Error(`queue ${name} is declared twice`);
    this.handlers.set(name, definition);
  }

  addPeriodic(definition: PeriodicDefinition): void {
    const queue = defineQueue({
      name: PERIODIC_QUEUE_PREFIX + definition.name,
      payload: z.object({}),
      concurrency: 1,
      maxAttempts: definition.maxAttempts ?? 1,
      ...(definition.leaseMs === undefined ? {} : { leaseMs: definition.leaseMs }),
    });
    this.addQueue(
      queue.handle((job) => definition.run(job as Parameters<PeriodicDefinition['run']>[0])),
      { kernel: true },
    );
    this.periodicJobs.push({ name: definition.name, everyMs: definition.everyMs, queue: queue.name, maxAttempts: queue.maxAttempts });
  }

  queue(name: string): QueueDefinition | undefined {
    return this.handlers.get(name);
  }

  queues(): QueueDefinition[] {
    return [...this.handlers.values()];
  }

  periodic(): readonly RegisteredPeriodic[] {
    return this.periodicJobs;
  }
}
