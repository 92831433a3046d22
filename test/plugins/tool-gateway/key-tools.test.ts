import t from 'tap';
import { GATEWAY_NAME_MAX, gatewayNames } from '../../../plugins/tool-gateway/key-tools.ts';

const tool = (id: string, name: string, alias: string | null = null, slug = 'tracker') => ({ id, slug, name, alias });

t.test('a name is <slug>__<alias or name>', async (t) => {
  const names = gatewayNames([tool('1', 'search'), tool('2', 'lookup', 'find')]);
  t.same([...names.entries()].sort(), [
    ['1', 'tracker__search'],
    ['2', 'tracker__find'],
  ]);
});

t.test('a name over 64 characters is cut and suffixed with 8 hex digits, the same every time', async (t) => {
  const long = 'x'.repeat(80);
  const name = gatewayNames([tool('a', long)]).get('a')!;
  t.equal(name.length, GATEWAY_NAME_MAX);
  t.match(name, /^tracker__x+_[0-9a-f]{8}$/);
  t.equal(gatewayNames([tool('a', long)]).get('a'), name);
});

t.test('two long names with the same first characters come out different', async (t) => {
  const names = gatewayNames([tool('a', `${'x'.repeat(70)}1`), tool('b', `${'x'.repeat(70)}2`)]);
  t.not(names.get('a'), names.get('b'));
});

t.test('on a collision the aliased tool keeps the name whatever the order; the other is suffixed', async (t) => {
  const forward = gatewayNames([tool('z', 'find'), tool('a', 'lookup', 'find')]);
  const backward = gatewayNames([tool('a', 'lookup', 'find'), tool('z', 'find')]);
  t.equal(forward.get('a'), 'tracker__find');
  t.match(forward.get('z'), /^tracker__find_[0-9a-f]{8}$/);
  t.same([...forward.entries()].sort(), [...backward.entries()].sort());
});

t.test('on a collision without an alias the smallest tool id keeps the name', async (t) => {
  const names = gatewayNames([tool('b', 'find'), tool('a', 'find')]);
  t.equal(names.get('a'), 'tracker__find');
  t.match(names.get('b'), /^tracker__find_[0-9a-f]{8}$/);
});
