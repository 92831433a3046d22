import t from 'tap';
import { z } from 'zod';
import { JobRegistry } from '../../core/jobs/job-registry.ts';
import {
  DEFAULT_QUEUE_SETTINGS,
  defineQueue,
  definePeriodic,
  JobInterrupted,
  type Job,
  jobErrorMessage,
  PermanentJobError,
  RetryJobAt,
  retryDelayMs,
  SnoozeJob,
} from '../../core/jobs/queue-definitions.ts';

const payload = z.object({});

t.test('defineQueue', async (t) => {
  t.test('a queue without settings gets the defaults', async (t) => {
    const spec = defineQueue({ name: 'test.defaults', payload });
    t.same(
      { concurrency: spec.concurrency, maxAttempts: spec.maxAttempts, leaseMs: spec.leaseMs, backoff: spec.backoff },
      { concurrency: 1, maxAttempts: 5, leaseMs: 30_000, backoff: { baseMs: 1_000, maxMs: 300_000 } },
    );
    t.same(DEFAULT_QUEUE_SETTINGS.backoff, { baseMs: 1_000, maxMs: 300_000 }, 'the defaults are not changed by a queue');
  });

  t.test('settings given are kept, and a partial backoff keeps the default for the rest', async (t) => {
    const spec = defineQueue({ name: 'test.set', payload, concurrency: 3, maxAttempts: 9, leaseMs: 5, backoff: { maxMs: 10 } });
    t.same([spec.name, spec.concurrency, spec.maxAttempts, spec.leaseMs, spec.backoff], ['test.set', 3, 9, 5, { baseMs: 1_000, maxMs: 10 }]);
    t.equal(spec.payload, payload);
  });

  t.test('queue names are lowercase words separated by dots, at most 100 characters', async (t) => {
    for (const name of ['a', 'webhooks.deliver', 'a1-b_c.d-2.e_3', 'x'.repeat(100)]) {
      t.equal(defineQueue({ name, payload }).name, name, `${name.slice(0, 20)} is accepted`);
    }
    for (const name of ['', 'Webhooks', '1abc', '-a', 'a..b', 'a.', '.a', 'a b', 'a.B', 'a/b', 'x'.repeat(101), 'ok\nnot.ok']) {
      t.throws(
        () => defineQueue({ name, payload }),
        { message: `queue name ${JSON.stringify(name)}: lowercase words separated by dots, e.g. webhooks.deliver` },
        `${JSON.stringify(name.slice(0, 20))} is refused`,
      );
    }
  });

  t.test('concurrency, maxAttempts and leaseMs must be positive integers', async (t) => {
    for (const field of ['concurrency', 'maxAttempts', 'leaseMs'] as const) {
      for (const value of [0, -1, 1.5, Number.NaN]) {
        t.throws(() => defineQueue({ name: 'test.bad', payload, [field]: value }), { message: `queue test.bad: ${field} must be a positive integer, got ${value}` });
      }
      t.equal(defineQueue({ name: 'test.one', payload, [field]: 1 })[field], 1, `${field} 1 is accepted`);
    }
  });

  t.test('a queue has no timeout unless it sets timeoutMs, a positive integer a timer can wait for', async (t) => {
    t.equal(defineQueue({ name: 'test.untimed', payload }).timeoutMs, undefined);
    t.equal(defineQueue({ name: 'test.timed', payload, timeoutMs: 90_000 }).timeoutMs, 90_000);
    t.equal(defineQueue({ name: 'test.longest', payload, timeoutMs: 2_147_483_647 }).timeoutMs, 2_147_483_647);
    for (const timeoutMs of [0, -1, 1.5, Number.NaN]) {
      t.throws(() => defineQueue({ name: 'test.bad', payload, timeoutMs }), { message: `queue test.bad: timeoutMs must be a positive integer, got ${timeoutMs}` });
    }
    t.throws(() => defineQueue({ name: 'test.bad', payload, timeoutMs: 2_147_483_648 }), {
      message: 'queue test.bad: timeoutMs must be at most 2147483647 (about 24 days), got 2147483648',
    });
  });

  t.test('handle pairs the queue with its handler', async (t) => {
    const spec = defineQueue({ name: 'test.handled', payload });
    const seen: unknown[] = [];
    const definition = spec.handle(async (job) => void seen.push(job.payload));
    t.equal(definition.spec, spec);
    await definition.run({ payload: { n: 1 } } as Job<unknown>);
    t.same(seen, [{ n: 1 }]);
  });
});

t.test('definePeriodic checks its interval and returns the definition', async (t) => {
  const run = async () => undefined;
  const definition = { name: 'tick', everyMs: 1, run };
  t.equal(definePeriodic(definition), definition);
  for (const everyMs of [0, -5, 0.5]) {
    t.throws(() => definePeriodic({ name: 'tick', everyMs, run }), { message: `queue tick: everyMs must be a positive integer, got ${everyMs}` });
  }
});

t.test('retryDelayMs', async (t) => {
  const backoff = { baseMs: 1_000, maxMs: 5_000 };
  t.test('the ceiling doubles per attempt from baseMs, up to maxMs', async (t) => {
    t.same(
      [1, 2, 3, 4, 5].map((attempt) => retryDelayMs(attempt, backoff, () => 1)),
      [1_000, 2_000, 4_000, 5_000, 5_000],
    );
  });
  t.test('attempt 0 or below is treated as the first', async (t) => {
    t.same([retryDelayMs(0, backoff, () => 1), retryDelayMs(-3, backoff, () => 1)], [1_000, 1_000]);
  });
  t.test('full jitter: the delay is random() times the ceiling, rounded to the millisecond', async (t) => {
    t.equal(
      retryDelayMs(2, backoff, () => 0),
      0,
    );
    t.equal(
      retryDelayMs(2, backoff, () => 0.25),
      500,
    );
    t.equal(
      retryDelayMs(1, { baseMs: 3, maxMs: 100 }, () => 0.5),
      2,
      '1.5 rounds to 2',
    );
    t.equal(
      retryDelayMs(1, { baseMs: 3, maxMs: 100 }, () => 0.4),
      1,
      '1.2 rounds to 1',
    );
  });
});

t.test('jobErrorMessage', async (t) => {
  t.test('an Error keeps its message only; a named error is prefixed by its name', async (t) => {
    t.equal(jobErrorMessage(new Error('plain')), 'plain');
    t.equal(jobErrorMessage(new TypeError('typed')), 'TypeError: typed');
    t.equal(jobErrorMessage(new PermanentJobError('never')), 'PermanentJobError: never');
    const nameless = new Error('nameless');
    nameless.name = '';
    t.equal(jobErrorMessage(nameless), 'nameless');
  });
  t.test('anything else is converted to a string', async (t) => {
    t.equal(jobErrorMessage('a string'), 'a string');
    t.equal(jobErrorMessage(42), '42');
  });
  t.test('whitespace collapses to one line, trimmed', async (t) => {
    t.equal(jobErrorMessage(new Error('  line one\n\n  line\ttwo  ')), 'line one line two');
  });
  t.test('token-shaped secrets are masked, keeping their prefix', async (t) => {
    t.equal(
      jobErrorMessage(new Error('svc_live_abcdef svc_sess_abc.def whsec_a1b2c3 sk-abcdefgh Bearer abcdef-ghi')),
      'svc_live_[redacted] svc_sess_[redacted] whsec_[redacted] sk-[redacted] Bearer [redacted]',
    );
    t.equal(jobErrorMessage(new Error('sk-abc svc_live_12345 Bearer x')), 'sk-abc svc_live_12345 Bearer x', 'shorter than 6 characters: not a token');
    t.equal(jobErrorMessage(new Error('ask-abcdefgh')), 'ask-abcdefgh', 'only at a word boundary');
    t.equal(jobErrorMessage(new Error('sk-aaaaaa then sk-bbbbbb')), 'sk-[redacted] then sk-[redacted]', 'every occurrence');
  });
  t.test('at most 500 characters, the 500th an ellipsis when cut', async (t) => {
    t.equal(jobErrorMessage(new Error('x'.repeat(500))), 'x'.repeat(500));
    t.equal(jobErrorMessage(new Error('x'.repeat(501))), `${'x'.repeat(499)}…`);
  });
  t.test('an empty message says the job failed without one', async (t) => {
    t.equal(jobErrorMessage(new Error('')), 'failed without a message');
    t.equal(jobErrorMessage(new Error(' \n ')), 'failed without a message');
  });
});

t.test('JobInterrupted and PermanentJobError say what happened', async (t) => {
  t.same(
    (['cancelled', 'lease_lost', 'shutdown', 'timeout'] as const).map((reason) => {
      const error = new JobInterrupted(reason);
      return [error.name, error.reason, error.message];
    }),
    [
      ['JobInterrupted', 'cancelled', 'the job was cancelled'],
      ['JobInterrupted', 'lease_lost', "the job's lease was lost: another worker owns it now"],
      ['JobInterrupted', 'shutdown', 'the worker is shutting down'],
      ['JobInterrupted', 'timeout', "the job timed out: it ran longer than its queue's timeoutMs"],
    ],
  );
  t.equal(new PermanentJobError('x').name, 'PermanentJobError');
});

t.test('SnoozeJob and RetryJobAt carry the time the handler chose and its reason', async (t) => {
  const runAt = new Date('2026-03-02T11:00:00.000Z');
  t.same(
    [new SnoozeJob(runAt, 'the organisation runs all it may'), new RetryJobAt(runAt, 'the receiver asked')].map((error) => [error.name, error.runAt, error.message, jobErrorMessage(error)]),
    [
      ['SnoozeJob', runAt, 'the organisation runs all it may', 'SnoozeJob: the organisation runs all it may'],
      ['RetryJobAt', runAt, 'the receiver asked', 'RetryJobAt: the receiver asked'],
    ],
  );
});

t.test('JobRegistry', async (t) => {
  const noop = async () => undefined;
  t.test('a plugin cannot take the kernel prefixes; the kernel can', async (t) => {
    const registry = new JobRegistry();
    for (const name of ['periodic.mine', 'event.mine']) {
      t.throws(() => registry.addQueue(defineQueue({ name, payload }).handle(noop)), {
        message: `queue ${name}: names starting with 'periodic.' or 'event.' are the kernel's`,
      });
      registry.addQueue(defineQueue({ name, payload }).handle(noop), { kernel: true });
      t.ok(registry.queue(name), `the kernel registers ${name}`);
    }
    registry.addQueue(defineQueue({ name: 'periodicity', payload }).handle(noop));
    t.ok(registry.queue('periodicity'), 'a name merely starting with the word is a plugin’s');
  });

  t.test('a queue declared twice is refused', async (t) => {
    const registry = new JobRegistry();
    const first = defineQueue({ name: 'test.twice', payload }).handle(noop);
    registry.addQueue(first);
    t.throws(() => registry.addQueue(defineQueue({ name: 'test.twice', payload }).handle(noop)), { message: 'queue test.twice is declared twice' });
    t.equal(registry.queue('test.twice'), first, 'the first declaration stays');
  });

  t.test('queue() finds a queue by name; queues() lists them in declaration order', async (t) => {
    const registry = new JobRegistry();
    const a = defineQueue({ name: 'test.a', payload }).handle(noop);
    const b = defineQueue({ name: 'test.b', payload }).handle(noop);
    registry.addQueue(a);
    registry.addQueue(b);
    t.equal(registry.queue('test.b'), b);
    t.equal(registry.queue('test.c'), undefined);
    t.same(registry.queues(), [a, b]);
  });

  t.test('a periodic job gets the kernel queue periodic.<name>: one at a time, one attempt unless set', async (t) => {
    const registry = new JobRegistry();
    const ran: string[] = [];
    registry.addPeriodic(definePeriodic({ name: 'sweep', everyMs: 60_000, run: async (job) => void ran.push(job.id) }));
    registry.addPeriodic(definePeriodic({ name: 'retried', everyMs: 1_000, maxAttempts: 3, leaseMs: 7, run: noop }));
    t.same(registry.periodic(), [
      { name: 'sweep', everyMs: 60_000, queue: 'periodic.sweep', maxAttempts: 1 },
      { name: 'retried', everyMs: 1_000, queue: 'periodic.retried', maxAttempts: 3 },
    ]);
    const sweep = registry.queue('periodic.sweep')!;
    t.same([sweep.spec.concurrency, sweep.spec.maxAttempts, sweep.spec.leaseMs], [1, 1, DEFAULT_QUEUE_SETTINGS.leaseMs]);
    t.same(sweep.spec.payload.parse({}), {}, 'its payload is the empty object');
    t.same([registry.queue('periodic.retried')!.spec.maxAttempts, registry.queue('periodic.retried')!.spec.leaseMs], [3, 7]);
    await sweep.run({ id: '9' } as Job<unknown>);
    t.same(ran, ['9'], "the queue's handler runs the periodic job");
  });
});
