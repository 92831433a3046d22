import t from 'tap';
import { SqlMailOutbox } from '../../../adapters/sql/mail-outbox.ts';
import { eventTypeEntry } from '../../../core/events/event-catalogue.ts';
import { startMeteredGateway, user } from './metered-gateway.ts';

/**
 * Spend caps as events: an alert-only cap reached is budget.threshold_reached and a mail to each
 * owner, a blocking cap that refuses a call is budget.cap_reached; each once per cap and period.
 */
t.test('spend cap events', async (t) => {
  t.setTimeout(180_000);
  // Real time, moved a day forward to reach the next period (sessions and keys are dated by it too).
  let offsetMs = 0;
  const clock = () => new Date(Date.now() + offsetMs);
  const g = await startMeteredGateway(t, { clock });
  const ownerEmail = (await g.test.call('GET', '/client/whoami')).json().credential.email as string;
  const outbox = new SqlMailOutbox(g.db, g.test.config.mail.from);
  const eventsOf = async (type: string, subject: string) =>
    (await g.db.query<{ data: unknown }>('SELECT data FROM events WHERE type = $1 AND subject = $2', [type, subject])).rows.map(
      (row) => (typeof row.data === 'string' ? JSON.parse(row.data) : row.data) as Record<string, unknown>,
    );
  const capMails = async () => (await outbox.read({ to: ownerEmail })).filter((mail) => mail.subject.startsWith('Spend alert'));

  t.test('an alert-only cap reached emits one budget.threshold_reached with its project, and mails the owner once per period', async (t) => {
    // A daily alert cap of 10 µ$; every call costs 24 µ$ (12 input + 6 output tokens, the fake's default).
    const { id, key } = await g.newKey({ name: 'alerted' });
    await g.patchKey(id, { spendCap: { usd: 0.00001, period: 'day', mode: 'alert' } });
    for (let i = 0; i < 3; i += 1) t.equal((await g.chat(key, { model: 'solo', messages: user(`call ${i}`), max_tokens: 20 })).status, 200);
    await g.settled();
    await g.test.app.svc.workers.runUntilIdle();
    const events = await eventsOf('budget.threshold_reached', id);
    t.equal(events.length, 1);
    t.match(events[0], { scope: 'key', scopeId: id, projectId: g.test.defaultProjectId, capMicros: '10', period: 'day', mode: 'alert' });
    t.ok(eventTypeEntry('budget.threshold_reached').schema.safeParse(events[0]).success, 'the data matches the declared schema');
    const mails = await capMails();
    t.equal(mails.length, 1, 'one mail to the owner');
    t.match(mails[0]?.text, /\$0\.00001 per day/);

    offsetMs += 24 * 3_600_000;
    t.equal((await g.chat(key, { model: 'solo', messages: user('the next day'), max_tokens: 20 })).status, 200);
    await g.settled();
    await g.test.app.svc.workers.runUntilIdle();
    t.equal((await eventsOf('budget.threshold_reached', id)).length, 2, 'a new period alerts again');
    t.equal((await capMails()).length, 2, 'and mails again');
  });

  t.test('a blocking cap that refuses calls emits one budget.cap_reached per period', async (t) => {
    const { id, key } = await g.newKey({ name: 'capped' });
    await g.patchKey(id, { spendCap: { usd: 0.00001, period: 'day', mode: 'blocking' } });
    const mailsBefore = (await capMails()).length;
    for (let i = 0; i < 3; i += 1) {
      const refused = await g.chat(key, { model: 'solo', messages: user(`refused ${i}`), max_tokens: 20 });
      t.equal(refused.body?.error?.code, 'budget_exceeded');
    }
    await g.settled();
    await g.test.app.svc.workers.runUntilIdle();
    const events = await eventsOf('budget.cap_reached', id);
    t.equal(events.length, 1);
    t.match(events[0], { scope: 'key', scopeId: id, projectId: g.test.defaultProjectId, capMicros: '10', mode: 'blocking' });
    t.ok(eventTypeEntry('budget.cap_reached').schema.safeParse(events[0]).success, 'the data matches the declared schema');
    t.equal(await eventsOf('budget.threshold_reached', id).then((e) => e.length), 0);
    t.equal((await capMails()).length, mailsBefore, 'a blocking cap is not mailed: its refusals say it');
  });
});
