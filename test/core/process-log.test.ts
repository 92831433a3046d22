import t from 'tap';
import { manifest as defaultManifest } from '../../plugins/index.ts';
import { throwingPlugin } from '../fixtures/throwing-plugin.ts';
import { allPlugins, buildTestApp } from '../helpers/app.ts';

const manifest = [...defaultManifest, throwingPlugin];
const lines: Array<Record<string, unknown>> = [];
const test = await buildTestApp(t, {
  manifest,
  plugins: allPlugins(manifest),
  config: { server: { logLevel: 'info' } },
  logStream: { write: (line) => void lines.push(JSON.parse(line) as Record<string, unknown>) },
});

/** Lines logged while `work` ran. */
async function logged(work: () => Promise<unknown>): Promise<Array<Record<string, unknown>>> {
  const from = lines.length;
  await work();
  return lines.slice(from);
}

t.test('an internal error is logged once, bound to the request id of the response', async (t) => {
  let requestId = '';
  const written = await logged(async () => {
    const response = await test.call('GET', '/client/fixture/throws');
    t.equal(response.statusCode, 500);
    requestId = String(response.headers['x-request-id']);
  });
  const errors = written.filter((line) => line.level === 50);
  t.equal(errors.length, 1);
  t.equal(errors[0]!.reqId, requestId);
  t.match(JSON.stringify(errors[0]), /database exploded/, 'the log keeps the real error the response masks');
});

t.test('the caller’s credential never reaches the log', async (t) => {
  const written = await logged(() => test.call('GET', '/client/fixture/throws'));
  t.ok(written.length > 0);
  t.notOk(JSON.stringify(written).includes(test.ownerToken));
});

t.test('a request that succeeds logs nothing', async (t) => {
  const written = await logged(() => test.call('GET', '/client/keys'));
  t.same(written, []);
});
