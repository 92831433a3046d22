import type { PubSub, Unsubscribe } from '../../core/ports/coordination.ts';
import type { RedisClient } from './redis-client.ts';

/**
 * Publishing goes over the command connection; subscribing needs a connection of its own (a
 * subscribed connection accepts no other commands), opened on the first subscribe so instances
 * that never subscribe never hold one. Each subscribe registers its own listener with node-redis,
 * which keeps the channel subscribed on the server until the last listener is removed and
 * resubscribes by itself after a reconnect.
 */
export class RedisPubSub implements PubSub {
  private subscriber: Promise<RedisClient> | undefined;
  private closed = false;

  constructor(
    private readonly client: RedisClient,
    private readonly prefix: string,
    private readonly openSubscriber: () => Promise<RedisClient>,
  ) {}

  async publish(channel: string, message: string): Promise<void> {
    await this.client.publish(this.channel(channel), message);
  }

  async subscribe(channel: string, handler: (message: string) => void): Promise<Unsubscribe> {
    if (this.closed) throw new Error('coordination is closed');
    const subscriber = await this.connection();
    const name = this.channel(channel);
    const listener = (message: string): void => {
      // A throwing handler must not break delivery to the others or the connection's parser.
      try {
        handler(message);
      } catch (err) {
        process.stderr.write(`[coordination:redis] pubsub handler for ${channel} threw: ${String(err)}\n`);
      }
    };
    await subscriber.subscribe(name, listener);
    let subscribed = true;
    return async () => {
      if (!subscribed) return;
      subscribed = false;
      // Closing the connection already dropped every subscription.
      if (this.closed) return;
      await subscriber.unsubscribe(name, listener);
    };
  }

  /** Closes the subscriber connection, if one was ever opened, with the given closer. */
  async close(closeClient: (client: RedisClient) => Promise<void>): Promise<void> {
    this.closed = true;
    const opening = this.subscriber;
    this.subscriber = undefined;
    if (!opening) return;
    const subscriber = await opening.catch(() => undefined);
    if (subscriber) await closeClient(subscriber);
  }

  private connection(): Promise<RedisClient> {
    if (!this.subscriber) {
      const opening = this.openSubscriber();
      this.subscriber = opening;
      // A failed attempt is forgotten so the next subscribe tries again.
      opening.catch(() => {
        if (this.subscriber === opening) this.subscriber = undefined;
      });
    }
    return this.subscriber;
  }

  private channel(channel: string): string {
    return `${this.prefix}ch:${channel}`;
  }
}
