import t from 'tap';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { ServerResponse } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { decodeRecord } from '../../../plugins/metering/billing-journal.ts';
import { estimatedInputTokens, startMeteredGateway, user } from './metered-gateway.ts';

/**
 * A call is on the billing journal before the upstream can answer it, so a process killed at any
 * point after the upstream answered still bills it on restart (test/core/crash-billing.test.ts
 * kills one under load). Decided by the fake upstream holding the call: while it holds it, the
 * journal must already have the call's provisional record.
 */

/** Every whole record in the journal's segments, in every database folder under `root`. */
function journalRecords(root: string) {
  const records = [];
  for (const folder of readdirSync(root)) {
    for (const name of readdirSync(join(root, folder)).filter((file) => file.endsWith('.seg'))) {
      for (const line of readFileSync(join(root, folder, name), 'utf8').split('\n')) {
        const record = line === '' ? null : decodeRecord(line);
        if (record) records.push(record);
      }
    }
  }
  return records;
}

for (const stream of [false, true]) {
  const kind = stream ? 'streamed' : 'JSON';
  t.test(`a ${kind} call is journaled, billed its counted input, before the upstream receives it`, async (t) => {
    const root = mkdtempSync(join(tmpdir(), 'svc-journal-first-'));
    t.teardown(() => rmSync(root, { recursive: true, force: true }));
    const gateway = await startMeteredGateway(t, { metering: { requestLog: { journalDir: root } } });
    const { key } = await gateway.newKey();
    let release!: () => void;
    gateway.upstream.enqueue({ kind: 'reply', holdUntil: new Promise<void>((resolve) => (release = resolve)) });

    const content = 'a prompt the process may die under';
    const answered = gateway.chat(key, { model: 'solo', stream, messages: user(content) });
    const held = await gateway.upstream.arrived();
    const requestId = held.headers['x-client-request-id'];
    const provisional = journalRecords(root).filter((record) => record.row.id === requestId);
    t.match(
      provisional,
      [{ kind: 'started', row: { statusCode: 500, errorCode: 'gateway_interrupted', inputTokens: estimatedInputTokens(content), outputTokens: 0, usageEstimated: true, streamed: stream } }],
      'while the upstream holds the call, its provisional record is on disk',
    );
    t.equal(provisional[0]?.row.costMicros, BigInt(estimatedInputTokens(content)), 'priced as its input alone (1 µ$ a token)');

    release();
    t.equal((await answered).status, 200);
    await gateway.settled();
    const logged = await gateway.db.query<{ status_code: number; error_code: string | null }>('SELECT status_code, error_code FROM request_logs WHERE id = $1', [requestId]);
    t.same(logged.rows, [{ status_code: 200, error_code: null }], 'settled, the call is logged by its own row');
  });
}

/**
 * The call's own row is journaled before its answer's last bytes go out, so a process killed after
 * its client read the whole answer bills it by that row (its output too), never as interrupted.
 * Decided by looking at the journal at the moment the response is ended.
 */
for (const stream of [false, true]) {
  const kind = stream ? 'streamed' : 'JSON';
  t.test(`a ${kind} call's own row is journaled before its response ends`, async (t) => {
    const root = mkdtempSync(join(tmpdir(), 'svc-journal-last-'));
    t.teardown(() => rmSync(root, { recursive: true, force: true }));
    const gateway = await startMeteredGateway(t, { metering: { requestLog: { journalDir: root } } });
    const { key } = await gateway.newKey();
    const rowsWhenEnded: string[][] = [];
    const end = ServerResponse.prototype.end;
    t.teardown(() => {
      ServerResponse.prototype.end = end;
    });
    ServerResponse.prototype.end = function (this: ServerResponse, ...args: unknown[]) {
      // The fake upstream answers in this process too; the gateway's own response is the one to the client.
      const toClient = this.req?.headers['x-client-request-id'] === undefined;
      if (toClient && this.req?.url === '/v1/chat/completions' && !this.writableEnded) {
        rowsWhenEnded.push(journalRecords(root).flatMap((record) => (record.kind === 'row' ? [record.row.id] : [])));
      }
      return (end as (...a: unknown[]) => ServerResponse).apply(this, args);
    } as typeof end;

    const answered = await gateway.chat(key, { model: 'solo', stream, messages: user('the whole answer, then a kill') });
    t.equal(answered.status, 200);
    const requestId = String(answered.headers.get('x-request-id'));
    t.equal(rowsWhenEnded.length, 1, 'the response was ended once');
    t.ok(rowsWhenEnded[0]?.includes(requestId), 'when it was, the call’s own row was on the journal');
  });
}
