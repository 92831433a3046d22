import { randomUUID } from 'node:crypto';
import t from 'tap';
import { z } from 'zod';
import { type CodesOf, defineErrorCodes } from '../../core/kernel/error-catalogue.ts';
import { ApiError } from '../../core/kernel/errors.ts';
import { defineSubscriber } from '../../core/events/domain-events.ts';
import { defineEventTypes, type PayloadsOf } from '../../core/events/event-catalogue.ts';
import { definePeriodic, defineQueue } from '../../core/jobs/queue-definitions.ts';
import { actorOf } from '../../core/operations/operation-events.ts';
import { defineOperation } from '../../core/operations/operations.ts';
import { definePlugin, type AnyPlugin } from '../../core/kernel/plugin.ts';
import { Tokens } from '../../core/kernel/di-tokens.ts';
import { accountPlugin } from '../../plugins/account/index.ts';
import { buildTestApp } from '../helpers/app.ts';
import { deferred } from '../helpers/jobs.ts';

// A plugin's own event type, declared beside it as a third-party plugin would.
const NOTE_EVENTS = defineEventTypes('notes', {
  'note.written': {
    schema: z.object({ noteId: z.uuid(), text: z.string() }),
    description: 'A note was written',
    public: true,
    example: { noteId: '7d0e1f4a-3b2c-4d5e-8f90-a1b2c3d4e5f6', text: 'hello' },
  },
});

declare module '../../core/events/domain-events.ts' {
  interface EventCatalogue extends PayloadsOf<typeof NOTE_EVENTS> {}
}

// A plugin's own error code, catalogued beside it as a third-party plugin would.
const NOTE_ERRORS = defineErrorCodes('notes', { note_refused: { status: 409, type: 'conflict_error', message: 'This note is refused' } });

declare module '../../core/kernel/error-catalogue.ts' {
  interface ErrorCodes extends CodesOf<typeof NOTE_ERRORS> {}
}

const deliveries = defineQueue({ name: 'notes.deliver', payload: z.object({ noteId: z.uuid(), text: z.string() }) });

interface NotesState {
  started: boolean;
  delivered: string[];
  fed: string[];
  sweeps: number;
  /** A job that blocks until released (texts starting with "hold"). */
  hold: ReturnType<typeof deferred<void>>;
  holding: ReturnType<typeof deferred<void>>;
  /** What the jobs table held when the plugin was stopped. */
  atStop: Array<{ text: string; state: string }> | null;
}

/** A plugin that uses every seam: a queue, a periodic job, a subscriber, and an operation writing through all of them. */
function notesPlugin(state: NotesState): AnyPlugin {
  return definePlugin({
    name: 'notes',
    description: 'Test notes',
    migrations: [{ owner: 'notes', version: 1, name: 'notes', sql: 'CREATE TABLE notes (id uuid PRIMARY KEY, text text NOT NULL);' }],
    operations: ({ container }) => [
      defineOperation({
        name: 'notes.create',
        method: 'POST',
        path: '/notes',
        summary: 'Write a note',
        readOnly: false,
        scope: null,
        body: z.strictObject({ text: z.string(), refuse: z.boolean().optional() }),
        output: z.object({ id: z.uuid() }),
        errors: ['note_refused'],
        status: 201,
        async handler({ body }, { credential, transaction }) {
          const jobs = container.resolve(Tokens.Jobs);
          const events = container.resolve(Tokens.Events);
          return transaction(async (tx) => {
            const id = randomUUID();
            await tx.query('INSERT INTO notes (id, text) VALUES ($1, $2)', [id, body.text]);
            await jobs.enqueue(deliveries, { noteId: id, text: body.text }, { tx });
            await events.emit(tx, { type: 'note.written', organizationId: credential.organizationId, subject: id, data: { noteId: id, text: body.text }, actor: actorOf(credential) });
            if (body.refuse) throw new ApiError('note_refused', 'This note is refused after it was written');
            return { id };
          });
        },
      }),
    ],
    queues: () => [
      deliveries.handle(async (job) => {
        if (!state.started) throw new Error('a job ran before the plugin started');
        if (job.payload.text.startsWith('hold')) {
          state.holding.resolve();
          await state.hold.promise;
        }
        state.delivered.push(job.payload.text);
      }),
    ],
    periodic: () => [definePeriodic({ name: 'notes.sweep', everyMs: 3_600_000, run: async () => void (state.sweeps += 1) })],
    subscribers: () => [defineSubscriber({ name: 'notes-feed', events: ['note.written'], handle: async (event) => void state.fed.push(event.data.text) })],
    async start() {
      state.started = true;
    },
    async stop({ container }) {
      const { rows } = await container
        .resolve(Tokens.Database)
        .query<{ text: string; state: string }>("SELECT payload->>'text' AS text, state FROM jobs WHERE queue = 'notes.deliver' ORDER BY id");
      state.atStop = rows;
    },
  });
}

const freshState = (): NotesState => ({ started: false, delivered: [], fed: [], sweeps: 0, hold: deferred(), holding: deferred(), atStop: null });

async function notesApp(t: Parameters<typeof buildTestApp>[0], state: NotesState, options: { role?: 'api' | 'worker' | 'all' } = {}) {
  const manifest = [accountPlugin, notesPlugin(state)];
  return buildTestApp(t, { manifest, plugins: { account: {}, notes: {} }, config: { server: { role: options.role ?? 'all' } } });
}

t.test('an operation enqueues a job and emits an event in its transaction; workers run both after the plugins started', async (t) => {
  const state = freshState();
  const test = await notesApp(t, state);
  const created = await test.call('POST', '/client/notes', { body: { text: 'hello' } });
  t.equal(created.statusCode, 201);
  await test.app.svc.workers.runUntilIdle();
  t.same(state.delivered, ['hello'], 'the job ran');
  t.same(state.fed, ['hello'], 'the subscriber saw the event');
  t.equal(state.sweeps, 1, 'the periodic job ran its first tick');
  const db = test.app.svc.container.resolve(Tokens.Database);
  const { rows } = await db.query<{ data: Record<string, unknown> }>("SELECT data FROM events WHERE type = 'management.operation'");
  t.match(rows, [{ data: { operation: 'notes.create', method: 'POST', status: 201, code: null, targetId: created.json().id } }], 'the call is recorded, its target the created note');
});

t.test('an operation whose transaction fails leaves no job and no event, and its failure is recorded apart', async (t) => {
  const state = freshState();
  const test = await notesApp(t, state);
  const refused = await test.call('POST', '/client/notes', { body: { text: 'nope', refuse: true } });
  t.equal(refused.statusCode, 409);
  await test.app.svc.workers.runUntilIdle();
  const db = test.app.svc.container.resolve(Tokens.Database);
  t.same((await db.query('SELECT id FROM notes')).rows, [], 'the change rolled back');
  t.same((await db.query("SELECT id FROM jobs WHERE queue = 'notes.deliver'")).rows, [], 'no job');
  t.same(state.fed, [], 'no event delivered');
  const { rows } = await db.query<{ type: string; data: Record<string, unknown> }>('SELECT type, data FROM events');
  t.match(rows, [{ type: 'management.operation', data: { operation: 'notes.create', status: 409, code: 'note_refused', targetId: null } }]);
});

t.test('with role api, jobs are enqueued and nothing runs them', async (t) => {
  const state = freshState();
  const test = await notesApp(t, state, { role: 'api' });
  t.equal((await test.call('POST', '/client/notes', { body: { text: 'later' } })).statusCode, 201);
  const db = test.app.svc.container.resolve(Tokens.Database);
  const { rows } = await db.query<{ state: string }>("SELECT state FROM jobs WHERE queue = 'notes.deliver'");
  t.same(rows, [{ state: 'queued' }]);
  t.same((await db.query('SELECT name FROM periodic_jobs')).rows, [], 'no periodic job was scheduled by this process');
  t.same(state.delivered, []);
});

t.test('closing the app lets the running job finish, claims nothing new, and drains before plugins stop', async (t) => {
  const state = freshState();
  const test = await notesApp(t, state);
  await test.app.svc.workers.runUntilIdle();
  t.equal((await test.call('POST', '/client/notes', { body: { text: 'hold on' } })).statusCode, 201);
  await state.holding.promise;
  // The queue runs one job at a time, so this one waits for the slot the held job frees.
  await test.app.svc.container.resolve(Tokens.Jobs).enqueue(deliveries, { noteId: randomUUID(), text: 'too late' });
  const closed = test.app.close();
  while (test.app.svc.workers.claiming) await new Promise((resolve) => setImmediate(resolve));
  state.hold.resolve();
  await closed;
  t.same(state.delivered, ['hold on'], 'the running job finished; the new one was not claimed');
  t.same(
    state.atStop,
    [
      { text: 'hold on', state: 'succeeded' },
      { text: 'too late', state: 'queued' },
    ],
    'the plugin stopped after the worker drained',
  );
});

t.test('a plugin cannot take a queue name the kernel reserves', async (t) => {
  const sneaky = definePlugin({
    name: 'sneaky',
    description: 'Takes a kernel queue name',
    queues: () => [defineQueue({ name: 'event.audit-log', payload: z.object({}) }).handle(async () => undefined)],
  });
  await t.rejects(buildTestApp(t, { manifest: [sneaky], plugins: { sneaky: {} } }), /names starting with 'periodic.' or 'event.' are the kernel's/);
});
