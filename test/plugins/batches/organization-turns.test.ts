import t from 'tap';
import { createMemoryCoordination } from '../../../adapters/memory/memory-coordination.ts';
import { OrganizationTurns } from '../../../plugins/batches/organization-turns.ts';

const ORG = '0b5d7c7e-2f4e-4d0a-9a51-2f6f1c1f0a11';
const running = () => new AbortController().signal;

t.test("an organisation's lines take at most its limit of turns; another organisation's are not held up", async (t) => {
  const coordination = createMemoryCoordination();
  t.teardown(() => coordination.close());
  const turns = new OrganizationTurns(coordination, 2, 60_000, 0);
  t.equal(await turns.take(ORG, 'job-1', running()), true);
  t.equal(await turns.take(ORG, 'job-2', running()), true);
  t.equal(await turns.take(ORG, 'job-3', running()), false, 'the third finds none (and waits no time here)');
  t.equal(await turns.take('another-org', 'job-4', running()), true);
});

t.test('a waiting line takes the turn another line of this process gives back, without waiting out its time', async (t) => {
  const coordination = createMemoryCoordination();
  t.teardown(() => coordination.close());
  // An hour's wait: the test would time out if the waiter were not woken by the give.
  const turns = new OrganizationTurns(coordination, 1, 60_000, 3_600_000);
  t.equal(await turns.take(ORG, 'job-1', running()), true);
  const waiting = turns.take(ORG, 'job-2', running());
  await turns.give(ORG, 'job-1');
  t.equal(await waiting, true);
});

t.test('a waiting line gives up when its job is interrupted', async (t) => {
  const coordination = createMemoryCoordination();
  t.teardown(() => coordination.close());
  const turns = new OrganizationTurns(coordination, 1, 60_000, 3_600_000);
  t.equal(await turns.take(ORG, 'job-1', running()), true);
  const controller = new AbortController();
  const waiting = turns.take(ORG, 'job-2', controller.signal);
  controller.abort();
  t.equal(await waiting, false);
});
