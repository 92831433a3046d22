import type { PubSub, Unsubscribe } from '../../core/ports/coordination.ts';

type Handler = (message: string) => void;

/**
 * In-process pub/sub. Delivery is asynchronous (a microtask after publish), like Redis, so a
 * handler never runs inside the publisher's call stack and code written against one adapter
 * does not come to rely on synchronous delivery.
 */
export class MemoryPubSub implements PubSub {
  /** channel -> subscriptions. A wrapper per subscribe call, so one function subscribed twice is two subscriptions. */
  private readonly channels = new Map<string, Set<{ handler: Handler }>>();

  async publish(channel: string, message: string): Promise<void> {
    const subscriptions = this.channels.get(channel);
    if (!subscriptions) return;
    for (const subscription of [...subscriptions]) {
      queueMicrotask(() => {
        // A handler that unsubscribed between publish and delivery no longer wants the message.
        if (!subscriptions.has(subscription)) return;
        try {
          subscription.handler(message);
        } catch (err) {
          process.stderr.write(`[coordination:memory] pubsub handler for ${channel} threw: ${String(err)}\n`);
        }
      });
    }
  }

  async subscribe(channel: string, handler: Handler): Promise<Unsubscribe> {
    let subscriptions = this.channels.get(channel);
    if (!subscriptions) this.channels.set(channel, (subscriptions = new Set()));
    const subscription = { handler };
    subscriptions.add(subscription);
    return async () => {
      const current = this.channels.get(channel);
      if (!current) return;
      current.delete(subscription);
      if (current.size === 0) this.channels.delete(channel);
    };
  }

  clear(): void {
    this.channels.clear();
  }
}
