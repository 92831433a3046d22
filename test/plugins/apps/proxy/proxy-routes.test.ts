import t from 'tap';
import { MemoryPubSub } from '../../../../adapters/memory/memory-pubsub.ts';
import { closeClient, connectWithin, makeClient } from '../../../../adapters/redis/redis-client.ts';
import { RedisPubSub } from '../../../../adapters/redis/redis-pubsub.ts';
import type { PubSub } from '../../../../core/ports/coordination.ts';
import { publishRoute, publishRouteRemoval } from '../../../../plugins/apps/proxy/index.ts';
import { reportSkippedBackend } from '../../../helpers/databases.ts';
import { eventually } from '../../../helpers/eventually.ts';
import { randomSchemaName } from '../../../helpers/pg-schemas.ts';
import { type Answer, call, closeServer, listSource, route, startProxy, startUpstream } from './proxy-fixtures.ts';

type Test = Parameters<Parameters<typeof t.test>[0]>[0];

function named(name: string) {
  return (_req: unknown, res: { end(text: string): void }) => res.end(name);
}

/** Two replicas' pub/sub: one in-memory bus, or two connections to Redis under one prefix. */
async function sharedPubSubs(t: Test, kind: 'memory' | 'redis'): Promise<[PubSub, PubSub]> {
  if (kind === 'memory') {
    const bus = new MemoryPubSub();
    return [bus, bus];
  }
  const url = process.env.TEST_REDIS_URL as string;
  const prefix = `test:${randomSchemaName()}:`;
  const replica = async (): Promise<PubSub> => {
    const client = makeClient(url);
    client.on('error', () => undefined);
    await connectWithin(client, 'command');
    const pubsub = new RedisPubSub(client, prefix, async () => {
      const subscriber = client.duplicate();
      subscriber.on('error', () => undefined);
      await connectWithin(subscriber, 'subscriber');
      return subscriber;
    });
    t.teardown(async () => {
      await pubsub.close(closeClient);
      await closeClient(client);
    });
    return pubsub;
  };
  return [await replica(), await replica()];
}

const kinds: Array<'memory' | 'redis'> = process.env.TEST_REDIS_URL ? ['memory', 'redis'] : ['memory'];
if (!process.env.TEST_REDIS_URL) reportSkippedBackend('redis', 'TEST_REDIS_URL is not set: route changes ran over the in-memory pub/sub only');

for (const kind of kinds) {
  t.test(`a route changed on one replica is followed by the other replica's proxy (${kind})`, async (t) => {
    const first = await startUpstream(t, named('first'));
    const second = await startUpstream(t, named('second'));
    const [pubsubA, pubsubB] = await sharedPubSubs(t, kind);
    const hello = route('hello', first.target);
    const a = await startProxy(t, { source: listSource([hello]), pubsub: pubsubA });
    const b = await startProxy(t, { source: listSource([hello]), pubsub: pubsubB });
    t.equal((await call(b.port, 'hello.localhost')).body, 'first');

    await publishRoute(pubsubA, { ...hello, target: second.target, revision: 2 });
    await eventually(async () => (await call(b.port, 'hello.localhost')).body === 'second', 'replica B serving the new target');
    t.equal((await call(a.port, 'hello.localhost')).body, 'second', 'the publishing replica follows its own message');

    await publishRoute(pubsubA, { ...hello, target: first.target, revision: 1 });
    await publishRouteRemoval(pubsubA, 'hello', 3);
    await eventually(async () => (await call(b.port, 'hello.localhost')).status === 404, 'the removed app answering 404');
    t.equal(b.routes.get('hello'), undefined, 'the older revision did not bring the route back');
  });
}

t.test('a full reload repairs a change the pub/sub missed, and a failed reload keeps the routes held', async (t) => {
  const first = await startUpstream(t, named('first'));
  const second = await startUpstream(t, named('second'));
  const source = listSource([route('hello', first.target)]);
  const { port, routes } = await startProxy(t, { source });
  source.routes = [{ ...(source.routes[0] as ReturnType<typeof route>), target: second.target, revision: 2 }, route('new', second.target)];
  await routes.reload();
  t.equal((await call(port, 'hello.localhost')).body, 'second');
  t.equal((await call(port, 'new.localhost')).body, 'second');

  source.failing = true;
  await t.rejects(routes.reload(), /database unreachable/);
  t.equal((await call(port, 'hello.localhost')).body, 'second', 'still served with the database away');
});

t.test('a client polling every 5 ms sees no error across deploys and a rollback', async (t) => {
  const instances = [await startUpstream(t, named('v1')), await startUpstream(t, named('v2')), await startUpstream(t, named('v3'))];
  const hello = route('hello', instances[0]?.target ?? null);
  const pubsub = new MemoryPubSub();
  const { port } = await startProxy(t, { source: listSource([hello]), pubsub });

  const failures: string[] = [];
  const served = new Set<string>();
  let polling = true;
  let requests = 0;
  const poller = (async () => {
    while (polling) {
      const answer: Answer | Error = await call(port, 'hello.localhost').catch((error: Error) => error);
      requests += 1;
      if (answer instanceof Error) failures.push(answer.message);
      else if (answer.status !== 200) failures.push(`${answer.status} ${answer.body}`);
      else served.add(answer.body);
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
  })();

  let revision = 1;
  const until = (name: string) => eventually(() => served.has(name), `the poller reaching ${name}`);
  // Each switch in the harshest order: the old instance goes away before the switch's message
  // arrives, cutting its kept-alive connections (and any request on them) at once.
  const switchTo = async (from: number, to: number, fresh: boolean): Promise<void> => {
    const old = instances[from];
    if (!old) throw new Error('no such instance');
    if (fresh) await closeServer(old.server);
    setTimeout(() => void publishRoute(pubsub, { ...hello, target: instances[to]?.target ?? null, revision: ++revision }), 20);
  };
  await until('v1');
  await switchTo(0, 1, true); // deploy
  await until('v2');
  await switchTo(1, 2, false); // an env change restarts onto a new instance; the old one lingers a moment
  await until('v3');
  await closeServer(instances[1]?.server as never);
  // Rollback onto the first build: its instance is started again on the same address.
  await new Promise<void>((resolve) => instances[0]?.server.listen(Number(instances[0].target.split(':')[1]), '127.0.0.1', resolve));
  await switchTo(2, 0, true);
  served.delete('v1');
  await until('v1');
  polling = false;
  await poller;
  t.same(failures, [], `no failed request among ${requests}`);
});
