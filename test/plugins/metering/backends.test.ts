import { setTimeout as sleep } from 'node:timers/promises';
import t, { type Test } from 'tap';
import type { AppConfigInput } from '../../../config/schema.ts';
import type { OpenAIBehaviour } from '../../fakes/fake-openai-upstream.ts';
import { onEveryBackend, reservedInputTokens, startMeteredGateway, user, type MeteredGateway } from './metered-gateway.ts';

/**
 * The money invariants, run once on the embedded stack (PGlite + in-memory coordination) and once
 * on PostgreSQL + Redis when TEST_PG_URL and TEST_REDIS_URL are set. One gateway per backend.
 */

interface LedgerRow {
  id: bigint;
  kind: string;
  amount_micros: bigint;
  balance_after_micros: bigint;
  created_at: Date;
}

/** Deterministic pseudo-random numbers (mulberry32), so a failure can be replayed. */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let x = Math.imul(a ^ (a >>> 15), 1 | a);
    x = (x + Math.imul(x ^ (x >>> 7), 61 | x)) ^ x;
    return ((x ^ (x >>> 14)) >>> 0) / 4294967296;
  };
}

async function ledgerRows(g: MeteredGateway): Promise<LedgerRow[]> {
  const { rows } = await g.db.query<LedgerRow>('SELECT id, kind, amount_micros, balance_after_micros, created_at FROM credit_ledger WHERE organization_id = $1 ORDER BY id', [
    g.test.organizationId,
  ]);
  return rows.map((row) => ({ ...row, id: BigInt(row.id), amount_micros: BigInt(row.amount_micros), balance_after_micros: BigInt(row.balance_after_micros) }));
}

function runOn(t: Test, storage: AppConfigInput['storage'] | undefined) {
  let g: MeteredGateway;

  t.before(async () => {
    g = await startMeteredGateway(t, { storage });
  });

  t.test('the ledger identity holds exactly after a random mix of top-ups, adjustments and calls', async (t) => {
    const seed = Number(process.env.LEDGER_SEED ?? 20261121);
    t.comment(`seed ${seed} (LEDGER_SEED replays it)`);
    const random = prng(seed);
    const pick = (n: number) => Math.floor(random() * n);
    const orgId = g.test.organizationId;
    const { key } = await g.newKey();
    const creditKey = `credit:${orgId}`;

    // One call first so the credit counter exists before the concurrent mix (a seed racing a top-up is a separate matter).
    t.equal((await g.chat(key, { model: 'mock-small', messages: user('warm up') })).status, 200);

    const marks: Date[] = [];
    // A mark strictly between the rows before and after it: created_at comes from the database's
    // clock (clock_timestamp()), which no injected clock reaches, so a few real milliseconds
    // separate them. Only a lower bound: a slower machine separates them further.
    const mark = async () => {
      await g.flush();
      await sleep(8);
      marks.push(new Date());
      await sleep(8);
    };
    const references = ['inv-1', 'inv-2', 'inv-3', 'inv-4', 'inv-5', 'inv-6'];
    const topups: Array<{ status: number; duplicate: boolean }> = [];
    const burst: Array<boolean | number> = [];
    let calls = 0;

    await mark();
    for (let phase = 0; phase < 5; phase += 1) {
      g.upstream.reset();
      const ops: Array<() => Promise<void>> = [];
      if (phase === 2) {
        // The same payment reported several times at once: credited once, the others duplicates.
        for (let i = 0; i < 6; i += 1) {
          ops.push(async () => {
            const response = await g.test.call('POST', '/client/credits/topup', { body: { amountUsd: 7.77, reference: 'burst-ref' } });
            topups.push({ status: response.statusCode, duplicate: response.statusCode === 201 && response.json().duplicate === true });
            burst.push(response.statusCode === 201 ? (response.json().duplicate as boolean) : response.statusCode);
          });
        }
      }
      for (let i = 0; i < 20; i += 1) {
        const kind = pick(10);
        if (kind < 2) {
          // A top-up: cents, sometimes with a reference seen before.
          const cents = 1 + pick(500);
          const reference = random() < 0.6 ? references[pick(references.length)] : undefined;
          ops.push(async () => {
            const response = await g.test.call('POST', '/client/credits/topup', { body: { amountUsd: cents / 100, ...(reference ? { reference } : {}) } });
            topups.push({ status: response.statusCode, duplicate: response.statusCode === 201 && response.json().duplicate === true });
          });
        } else if (kind < 4) {
          // An operator's adjustment (no route: through the ledger port, moving the live counter as top-up does).
          const micros = BigInt((1 + pick(2_000_000)) * (random() < 0.5 ? -1 : 1));
          ops.push(async () => {
            const line = await g.ledger.append(orgId, { kind: 'adjustment', amountMicros: micros, note: 'test adjustment' });
            if (line) await g.coordination.allowances.give([{ key: creditKey, amount: Number(micros) }], 30 * 60_000);
          });
        } else {
          const stream = random() < 0.4;
          const failing = random() < 0.1;
          const prompt = 1 + pick(5000);
          const behaviour: OpenAIBehaviour = failing
            ? { kind: 'status', status: 500 }
            : { kind: 'reply', usage: { prompt_tokens: prompt, completion_tokens: pick(2000), cached_tokens: pick(prompt) } };
          const mock = random() < 0.25;
          if (!mock) g.upstream.enqueue(behaviour);
          calls += 1;
          ops.push(async () => {
            const response = await g.chat(key, { model: mock ? 'mock-small' : 'solo', messages: user(`call ${phase}-${i}`), stream, max_tokens: 2000 });
            if (response.status !== 200 && response.status !== 502) throw new Error(`call: ${response.status} ${response.text}`);
          });
        }
      }
      await Promise.all(ops.map((op) => op()));
      await mark();
    }
    t.ok(calls > 20, `${calls} calls in the mix`);
    t.ok(
      topups.every((r) => r.status === 201),
      'every top-up answered 201 (repeats as duplicates, none failing)',
    );
    t.ok(
      topups.some((r) => r.duplicate),
      'the mix repeated a payment reference',
    );
    t.equal(burst.filter((d) => d === false).length, 1, 'a payment reported six times at once is credited once');
    t.same(
      burst.filter((d) => d !== true && d !== false),
      [],
      'the repeats are answered as duplicates, not errors',
    );
    const { rows: burstLines } = await g.db.query('SELECT 1 FROM credit_ledger WHERE organization_id = $1 AND reference = $2', [orgId, 'burst-ref']);
    t.equal(burstLines.length, 1, 'one ledger line for the repeated reference');

    await g.flush();
    const rows = await ledgerRows(g);
    t.ok(rows.length > 10, `${rows.length} ledger lines`);

    // Walk the table: every line continues the chain exactly.
    let previous = 0n;
    let broken = 0;
    for (const row of rows) {
      if (row.balance_after_micros !== previous + row.amount_micros) broken += 1;
      previous = row.balance_after_micros;
    }
    t.equal(broken, 0, 'every balance_after = previous balance_after + amount');
    const balance = await g.ledger.balance(orgId);
    t.equal(balance, previous, 'the balance row equals the last line');
    for (let i = 1; i < rows.length; i += 1) {
      if (rows[i]!.created_at < rows[i - 1]!.created_at) t.fail(`line ${rows[i]!.id} is older than the line before it`);
    }

    // Each window, checked against the lines themselves.
    const at = (instant: Date | undefined) => {
      if (!instant) return previous;
      const before = rows.filter((row) => row.created_at < instant);
      return before.length === 0 ? 0n : before[before.length - 1]!.balance_after_micros;
    };
    const windows: Array<[Date | undefined, Date | undefined]> = [
      [undefined, undefined],
      [marks[1], marks[3]],
      [marks[2], undefined],
      [undefined, marks[2]],
      [marks[0], marks[1]],
      [marks[3], marks[4]],
      [marks[4], marks[5]],
    ];
    for (const [from, to] of windows) {
      const label = `window ${from?.toISOString() ?? '…'} → ${to?.toISOString() ?? '…'}`;
      const query = new URLSearchParams({ ...(from ? { from: from.toISOString() } : {}), ...(to ? { to: to.toISOString() } : {}) });
      const response = await g.test.call('GET', `/client/credits/summary?${query}`);
      t.equal(response.statusCode, 200, label);
      const m = response.json().micros as Record<string, string>;
      const opening = BigInt(m['opening']!);
      const payments = BigInt(m['payments']!);
      const adjustments = BigInt(m['adjustments']!);
      const hosting = BigInt(m['hosting']!);
      const ai = BigInt(m['ai']!);
      const closing = BigInt(m['closing']!);
      t.equal(opening + payments + adjustments - hosting - ai, closing, `${label}: opening + payments + adjustments − hosting − ai = closing`);
      t.equal(opening, from ? at(from) : 0n, `${label}: opening is the balance at from`);
      t.equal(closing, at(to), `${label}: closing is the balance at to`);
      const inside = rows.filter((row) => (!from || row.created_at >= from) && (!to || row.created_at < to));
      const sum = (kinds: string[]) => inside.filter((row) => kinds.includes(row.kind)).reduce((total, row) => total + row.amount_micros, 0n);
      t.same(
        { payments, adjustments, hosting, ai },
        { payments: sum(['payment']), adjustments: sum(['adjustment']), hosting: -sum(['hosting', 'hosting_base_fee']), ai: -sum(['ai_usage']) },
        `${label}: each component is the sum of its lines`,
      );
      if (!from && !to) {
        t.equal(closing, balance, 'whole history: closing equals the balance');
        t.equal(ai, await g.loggedCost(), 'whole history: ai total equals the sum of request_logs.cost_micros');
        const credits = (await g.test.call('GET', '/client/credits')).json();
        t.equal(credits.balanceMicros, String(balance), 'GET /client/credits shows the same balance');
      }
    }
    const [counter] = await g.coordination.allowances.peek([creditKey]);
    t.equal(counter, Number(balance), 'the live credit counter equals the ledger balance once everything settled');
  });

  t.test('100 concurrent calls against a blocking cap that fits 10 spend no more than the cap', async (t) => {
    // Each call: the input bound (1 µ$ a token) + max_tokens 1000 (2000 µ$), and the upstream
    // reports exactly that usage, so the reservation and the actual cost are equal.
    const inputTokens = reservedInputTokens('hi');
    const perCall = BigInt(inputTokens) * 1n + 1000n * 2n;
    const cap = perCall * 10n;
    const { id, key } = await g.newKey({ name: 'capped' });
    await g.patchKey(id, { spendCap: { usd: Number(cap) / 1e6, period: 'month', mode: 'blocking' } });
    g.upstream.reset();
    for (let i = 0; i < 100; i += 1) g.upstream.enqueue({ kind: 'reply', content: 'ok', usage: { prompt_tokens: inputTokens, completion_tokens: 1000 } });

    const results = await Promise.all(Array.from({ length: 100 }, () => g.chat(key, { model: 'solo', messages: user('hi'), max_tokens: 1000 })));
    const ok = results.filter((r) => r.status === 200).length;
    const refused = results.filter((r) => r.status === 402 && r.body?.error?.code === 'budget_exceeded').length;
    t.equal(ok + refused, 100, `every call is a 200 or a 402 budget_exceeded (got ${[...new Set(results.map((r) => r.status))].join(', ')})`);
    t.equal(ok, 10, 'exactly the 10 calls that fit were served');
    t.equal(refused, 90);

    await g.flush();
    const spent = await g.loggedCost(id);
    t.ok(spent <= cap, `the key spent ${spent} µ$, cap ${cap} µ$`);
    t.equal(spent, perCall * BigInt(ok), 'each served call cost exactly its estimate');
    const detail = (await g.test.call('GET', `/client/keys/${id}`)).json();
    t.equal(detail.budget.state, 'exceeded');
    t.ok(detail.budget.spentUsd <= detail.budget.capUsd, 'the key detail agrees');
    const after = await g.chat(key, { model: 'solo', messages: user('hi'), max_tokens: 1000 });
    t.equal(after.status, 402, 'the cap still blocks once everything settled');
  });
}

onEveryBackend(t, runOn);
