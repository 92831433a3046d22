import type { PubSub, Unsubscribe } from '../../core/ports/coordination.ts';

/** The channel a cancel is published on: every process running deploys hears it. */
export const CANCEL_CHANNEL = 'apps.deploy.cancel';

/**
 * Cancels reaching the process that runs a deployment. `POST /services/{id}/deploy/cancel` marks the
 * deployment `cancelled` in its row (which the pipeline reads before each phase) and publishes its id
 * here; the process running it aborts that deployment's signal, which kills a running checkout or build
 * with its whole process group (build-runner.ts, git-process.ts). A process that missed the message
 * still stops at the next phase, from the row.
 */
export class DeployCancels {
  private readonly running = new Map<string, AbortController>();
  private unsubscribe: Unsubscribe | null = null;

  constructor(private readonly pubsub: PubSub) {}

  async listen(): Promise<void> {
    if (this.unsubscribe) return;
    this.unsubscribe = await this.pubsub.subscribe(CANCEL_CHANNEL, (message) => this.running.get(message)?.abort(new Error('deployment cancelled')));
  }

  async close(): Promise<void> {
    await this.unsubscribe?.();
    this.unsubscribe = null;
  }

  /** A signal aborted when the deployment is cancelled; `done` when its run ends. */
  track(deploymentId: string): { signal: AbortSignal; done: () => void } {
    const controller = new AbortController();
    this.running.set(deploymentId, controller);
    return { signal: controller.signal, done: () => this.running.delete(deploymentId) };
  }

  publish(deploymentId: string): Promise<void> {
    return this.pubsub.publish(CANCEL_CHANNEL, deploymentId);
  }
}
