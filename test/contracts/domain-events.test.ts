import t from 'tap';
import { z } from 'zod';
import { defineEventTypes, type PayloadsOf } from '../../core/events/event-catalogue.ts';
import { defineSubscriber } from '../../core/events/domain-events.ts';
import { JobRegistry } from '../../core/jobs/job-registry.ts';
import { JobInterrupted } from '../../core/jobs/queue-definitions.ts';
import type { Database } from '../../core/ports/database.ts';
import { databaseBackends, type DatabaseBackend } from '../helpers/databases.ts';
import { deferred, jobKit, testClock } from '../helpers/jobs.ts';
import { DomainEvents } from '../../core/events/domain-events.ts';
import { SqlEventStore } from '../../adapters/sql/event-store.ts';

const TEST_EVENTS = defineEventTypes('tests', {
  'test.happened': { schema: z.object({ n: z.number() }), description: 'A test event', public: false, example: { n: 1 } },
  'test.other': { schema: z.object({ label: z.string() }), description: 'Another test event', public: false, example: { label: 'x' } },
});

declare module '../../core/events/domain-events.ts' {
  interface EventCatalogue extends PayloadsOf<typeof TEST_EVENTS> {}
}

interface HasTeardown {
  teardown(fn: () => unknown): void;
}

async function open(backend: DatabaseBackend, t: HasTeardown): Promise<Database> {
  const { db, cleanup } = await backend.create();
  t.teardown(cleanup);
  await db.query('CREATE TABLE deliveries (event_id text NOT NULL, subscriber text NOT NULL, n int)');
  return db;
}

const system = { kind: 'system' as const, id: 'test', label: 'test', credential: null };

/** A subscriber whose effect is a row, written through job.complete so it happens once per event. */
function recording(name: string, events: Array<'test.happened' | 'test.other'> = ['test.happened']) {
  return defineSubscriber({
    name,
    events,
    async handle(event, job) {
      const n = event.type === 'test.happened' ? event.data.n : null;
      await job.complete((tx) => tx.query('INSERT INTO deliveries VALUES ($1, $2, $3)', [event.id, name, n]));
    },
  });
}

async function deliveries(db: Database) {
  return (await db.query<{ subscriber: string; n: number | null }>('SELECT subscriber, n FROM deliveries ORDER BY subscriber, n')).rows;
}

for (const backend of databaseBackends()) {
  t.test(backend.name, async (t) => {
    t.test('data jsonb cannot hold (a lone surrogate, NUL) is stored with a replacement character, not refused', async (t) => {
      const db = await open(backend, t);
      const kit = await jobKit(db, { clock: testClock() });
      const id = await db.transaction((tx) =>
        kit.events.emit(tx, { type: 'test.other', organizationId: null, subject: null, data: { label: 'a\ud800b\u0000c' }, actor: { ...system, label: 'x\udfffy' } }),
      );
      const stored = await new SqlEventStore(db).get(id);
      t.same(stored?.data, { label: 'a\ufffdb\ufffdc' });
      t.equal(stored?.actor?.label, 'x\ufffdy');
    });

    t.test('an event whose transaction rolls back is never recorded nor dispatched', async (t) => {
      const db = await open(backend, t);
      const kit = await jobKit(db, { clock: testClock() });
      kit.events.subscribe(recording('audit'));
      await t.rejects(
        db.transaction(async (tx) => {
          await kit.events.emit(tx, { type: 'test.happened', organizationId: null, subject: null, data: { n: 1 }, actor: system });
          throw new Error('the change failed');
        }),
      );
      await kit.runner().runUntilIdle();
      t.same(await deliveries(db), []);
      t.same((await db.query('SELECT id FROM events')).rows, [], 'no event');
      t.same((await db.query('SELECT id FROM jobs')).rows, [], 'no delivery job');
    });

    t.test('data its type does not declare is refused, and the change rolls back with it', async (t) => {
      const db = await open(backend, t);
      const kit = await jobKit(db, { clock: testClock() });
      kit.events.subscribe(recording('audit'));
      const wrong = { n: 'one' } as unknown as { n: number };
      await t.rejects(
        db.transaction(async (tx) => {
          await tx.query("INSERT INTO deliveries VALUES ('change', 'none', 1)");
          await kit.events.emit(tx, { type: 'test.happened', organizationId: null, subject: null, data: wrong, actor: system });
        }),
        /data of a test\.happened event does not match its schema/,
      );
      t.same(await deliveries(db), [], 'the change rolled back');
      t.same((await db.query('SELECT id FROM events')).rows, [], 'no event');
    });

    t.test('a type nothing declared is refused', async (t) => {
      const db = await open(backend, t);
      const kit = await jobKit(db, { clock: testClock() });
      const undeclared = 'test.undeclared' as 'test.happened';
      await t.rejects(
        db.transaction((tx) => kit.events.emit(tx, { type: undeclared, organizationId: null, subject: null, data: { n: 1 }, actor: system })),
        /not declared/,
      );
    });

    t.test('a committed event is delivered once to each subscriber of its type', async (t) => {
      const db = await open(backend, t);
      const kit = await jobKit(db, { clock: testClock() });
      kit.events.subscribe(recording('audit'));
      kit.events.subscribe(recording('webhooks', ['test.happened', 'test.other']));
      kit.events.subscribe(recording('elsewhere', ['test.other']));
      const id = await db.transaction((tx) => kit.events.emit(tx, { type: 'test.happened', organizationId: null, subject: 'thing-1', data: { n: 7 }, actor: system }));
      await kit.runner().runUntilIdle();
      t.same(await deliveries(db), [
        { subscriber: 'audit', n: 7 },
        { subscriber: 'webhooks', n: 7 },
      ]);
      const stored = await new SqlEventStore(db).get(id);
      t.match(stored, { id, type: 'test.happened', subject: 'thing-1', data: { n: 7 }, actor: system });
    });

    t.test('a dispatcher that dies mid-delivery is replaced and each subscriber still sees the event once', async (t) => {
      const db = await open(backend, t);
      const clock = testClock();
      const kit = await jobKit(db, { clock });
      // The producer's view, and a healthy replica: two subscribers that record the event.
      kit.events.subscribe(recording('audit'));
      kit.events.subscribe(recording('webhooks'));

      // A replica that freezes in the middle of delivering to 'audit' (its leases stop being renewed).
      const frozenRegistry = new JobRegistry();
      const frozenEvents = new DomainEvents({ store: new SqlEventStore(db), jobs: kit.jobs, registry: frozenRegistry, clock });
      const midway = deferred();
      const thaw = deferred();
      let lateError: unknown;
      frozenEvents.subscribe(
        defineSubscriber({
          name: 'audit',
          events: ['test.happened'],
          leaseMs: 300_000,
          async handle(event, job) {
            midway.resolve();
            await thaw.promise;
            try {
              await job.complete((tx) => tx.query("INSERT INTO deliveries VALUES ($1, 'audit', -1)", [event.id]));
            } catch (error) {
              lateError = error;
              throw error;
            }
          },
        }),
      );
      frozenEvents.subscribe(recording('webhooks'));
      const frozen = kit.runner({ registry: frozenRegistry, workerId: 'frozen' });

      await db.transaction((tx) => kit.events.emit(tx, { type: 'test.happened', organizationId: null, subject: null, data: { n: 1 }, actor: system }));
      await frozen.pollOnce();
      await midway.promise;

      // Past the frozen replica's lease, a healthy replica polls.
      clock.advance(300_000);
      const healthy = kit.runner({ workerId: 'healthy' });
      await healthy.runUntilIdle();

      thaw.resolve();
      await frozen.settled();
      t.ok(lateError instanceof JobInterrupted && lateError.reason === 'lease_lost', 'the frozen replica cannot complete the delivery it lost');
      t.same(
        await deliveries(db),
        [
          { subscriber: 'audit', n: 1 },
          { subscriber: 'webhooks', n: 1 },
        ],
        'each subscriber once',
      );
      const { rows } = await db.query<{ queue: string; state: string }>('SELECT queue, state FROM jobs ORDER BY queue');
      t.same(
        rows,
        [
          { queue: 'event.audit', state: 'succeeded' },
          { queue: 'event.webhooks', state: 'succeeded' },
        ],
        'one delivery job per subscriber',
      );
    });

    t.test('a subscriber that fails is retried until it succeeds, once', async (t) => {
      const db = await open(backend, t);
      const clock = testClock();
      const kit = await jobKit(db, { clock });
      let calls = 0;
      kit.events.subscribe(
        defineSubscriber({
          name: 'flaky',
          events: ['test.happened'],
          backoff: { baseMs: 1_000, maxMs: 1_000 },
          async handle(event, job) {
            calls += 1;
            // Fails after its write, inside the transaction: the write rolls back with it.
            await job.complete(async (tx) => {
              await tx.query("INSERT INTO deliveries VALUES ($1, 'flaky', $2)", [event.id, event.data.n]);
              if (calls === 1) throw new Error('the receiver was down');
            });
          },
        }),
      );
      await db.transaction((tx) => kit.events.emit(tx, { type: 'test.happened', organizationId: null, subject: null, data: { n: 3 }, actor: null }));
      const runner = kit.runner();
      await runner.runUntilIdle();
      t.same(await deliveries(db), [], 'the failed attempt left nothing');
      clock.advance(1_000);
      await runner.runUntilIdle();
      t.equal(calls, 2);
      t.same(await deliveries(db), [{ subscriber: 'flaky', n: 3 }]);
    });

    t.test('an event nobody subscribes to is recorded and dispatches nothing', async (t) => {
      const db = await open(backend, t);
      const kit = await jobKit(db, { clock: testClock() });
      kit.events.subscribe(recording('audit'));
      await db.transaction((tx) => kit.events.emit(tx, { type: 'test.other', organizationId: null, subject: null, data: { label: 'x' }, actor: null }));
      t.equal((await db.query('SELECT count(*)::int AS n FROM events')).rows[0]?.['n'], 1);
      t.same((await db.query('SELECT id FROM jobs')).rows, []);
    });

    t.test('a subscriber name is taken once', async (t) => {
      const db = await open(backend, t);
      const kit = await jobKit(db, { clock: testClock() });
      kit.events.subscribe(recording('audit'));
      t.throws(() => kit.events.subscribe(recording('audit')), /declared twice/);
    });
  });
}
