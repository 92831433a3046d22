import { chmodSync } from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { runtimesOnPath } from '../../../../plugins/apps/build-decision/index.ts';
import { scratchRepository } from './fixtures.ts';

/** The default probe: a runtime is available when its binary is an executable on PATH. */

t.test('runtimes whose binaries are executables on PATH, plus static', async (t) => {
  const first = scratchRepository(t, { go: '#!/bin/sh\n', node: 'not executable' });
  const second = scratchRepository(t, { python3: '#!/bin/sh\n' });
  chmodSync(path.join(first, 'go'), 0o755);
  chmodSync(path.join(second, 'python3'), 0o755);
  t.same(await runtimesOnPath([first, second].join(path.delimiter)), ['python', 'go', 'static'], 'a file without the execute bit is no binary');
});

t.test('an empty PATH has only static', async (t) => {
  t.same(await runtimesOnPath(''), ['static']);
});
