import t from 'tap';
import { loadOnce } from '../../core/kernel/load-once.ts';

t.test('uses made at once share one load', async (t) => {
  let loads = 0;
  const load = loadOnce(async () => ({ loaded: (loads += 1) }));
  const [first, second] = await Promise.all([load(), load()]);
  t.equal(loads, 1);
  t.equal(first, second);
  t.equal(await load(), first, 'and so does a later one');
});

t.test('a failed load is tried again on the next use', async (t) => {
  let loads = 0;
  const load = loadOnce(async () => {
    loads += 1;
    if (loads === 1) throw new Error('not yet');
    return 'loaded';
  });
  await t.rejects(load(), /not yet/);
  t.equal(await load(), 'loaded');
  t.equal(loads, 2);
});
