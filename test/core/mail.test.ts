import t from 'tap';
import { parseConfig } from '../../config/load.ts';
import { coreMigrations } from '../../adapters/sql/core-migrations.ts';
import { SqlMailOutbox } from '../../adapters/sql/mail-outbox.ts';
import { runMigrations } from '../../adapters/sql/migrator.ts';
import { SmtpMailer } from '../../adapters/smtp/smtp-mailer.ts';
import { MailDeliveryError } from '../../core/services/mail-messages.ts';
import { Tokens } from '../../core/kernel/di-tokens.ts';
import { startFakeSmtpServer } from '../fakes/fake-smtp-server.ts';
import { buildTestApp } from '../helpers/app.ts';
import { databaseBackends } from '../helpers/databases.ts';

type SmtpConfig = ConstructorParameters<typeof SmtpMailer>[0];

function smtpConfig(mail: Record<string, unknown>): SmtpConfig {
  return parseConfig({ mail: { driver: 'smtp', from: 'svc <no-reply@svc.test>', timeoutMs: 5000, ...mail } }).mail as SmtpConfig;
}

for (const backend of databaseBackends()) {
  t.test(`the local outbox on ${backend.name}`, async (t) => {
    const { db, cleanup } = await backend.create();
    t.teardown(cleanup);
    await runMigrations(db, coreMigrations);
    const outbox = new SqlMailOutbox(db, 'svc <no-reply@localhost>');

    t.test('keeps every message and lists it newest first, by recipient whatever its case', async (t) => {
      await outbox.send({ to: 'ada@example.com', subject: 'Your sign-in code', text: 'Code: 123456' });
      await outbox.send({ to: 'bob@example.com', subject: 'Invitation', text: 'Join us', html: '<p>Join us</p>' });
      await outbox.send({ to: 'Ada@Example.com', subject: 'Second code', text: 'Code: 654321' });
      t.same(
        (await outbox.read()).map((m) => m.subject),
        ['Second code', 'Invitation', 'Your sign-in code'],
      );
      const ada = await outbox.read({ to: 'ADA@example.com' });
      t.same(
        ada.map((m) => m.text),
        ['Code: 654321', 'Code: 123456'],
      );
      t.match((await outbox.read({ to: 'bob@example.com' }))[0], { from: 'svc <no-reply@localhost>', html: '<p>Join us</p>' });
      t.same(await outbox.read({ limit: 1 }).then((m) => m.length), 1);
    });

    const TOKEN = 'svc_pwd_0123456789abcdefghijABCDEFGHIJ0123456789abc';
    const invitation = (to: string) => ({ to, subject: 'Set your password', text: 'Your token: {{token}}', html: '<p>{{token}}</p>', secrets: { token: TOKEN } });
    /** Every stored row of the outbox, as text: what anyone with the database (or its backups) can read. */
    const stored = async () => JSON.stringify((await db.query('SELECT * FROM mail_outbox')).rows, (_key, value) => (typeof value === 'bigint' ? String(value) : value));

    t.test('a secret is kept apart from the body, shown in place by the first read, and forgotten by it', async (t) => {
      await outbox.send(invitation('carol@example.com'));
      const row = (await db.query<{ text_body: string }>("SELECT text_body FROM mail_outbox WHERE recipient = 'carol@example.com'")).rows[0];
      t.equal(row?.text_body, 'Your token: {{token}}', 'the body is stored with the placeholder');
      const [first] = await outbox.read({ to: 'carol@example.com' });
      t.equal(first?.text, `Your token: ${TOKEN}`, 'the first read shows the token in place');
      t.equal(first?.html, `<p>${TOKEN}</p>`);
      t.notOk((await stored()).includes(TOKEN), 'no column holds the token after that read');
      const [second] = await outbox.read({ to: 'carol@example.com' });
      t.match(second?.text, /^Your token: \[shown once already, \d{4}-/, 'a later read says where it was and when it was shown');
      t.notOk(second?.text.includes(TOKEN));
    });

    t.test('two readers at once: one of them sees the secret, never both', async (t) => {
      await outbox.send(invitation('dave@example.com'));
      const reads = await Promise.all([outbox.read({ to: 'dave@example.com' }), outbox.read({ to: 'dave@example.com' })]);
      const shown = reads.filter(([mail]) => mail?.text.includes(TOKEN));
      t.equal(shown.length, 1);
    });

    t.test('refuses a secret the message also carries in clear, or one its text never names', async (t) => {
      const clear = { ...invitation('erin@example.com'), html: `<p>${TOKEN}</p>` };
      await t.rejects(outbox.send(clear), MailDeliveryError, 'in clear in the html');
      await t.rejects(outbox.send({ ...invitation('erin@example.com'), text: 'no placeholder' }), MailDeliveryError, 'never named');
      await t.rejects(outbox.send({ ...invitation('erin@example.com'), secrets: { 'bad name': 'x' } }), MailDeliveryError, 'a name no placeholder can spell');
      t.notOk((await stored()).includes(TOKEN), 'nothing was stored');
    });

    t.test('refuses what could smuggle in another header or recipient', async (t) => {
      for (const to of ['a@b.test\r\nBcc: evil@x.test', 'a@b.test, c@d.test', 'Ada <a@b.test>', 'not-an-address', '']) {
        await t.rejects(outbox.send({ to, subject: 's', text: 't' }), MailDeliveryError, JSON.stringify(to));
      }
      await t.rejects(outbox.send({ to: 'a@b.test', subject: 'Hi\r\nBcc: evil@x.test', text: 't' }), MailDeliveryError);
    });
  });
}

for (const backend of databaseBackends()) {
  t.test(`on ${backend.name}, the migration that keeps secrets apart removes the set-password tokens earlier mail kept in its body`, async (t) => {
    const { db, cleanup } = await backend.create();
    t.teardown(cleanup);
    const secretsApart = (m: { owner: string; version: number }) => m.owner === 'core-mail' && m.version === 3;
    await runMigrations(
      db,
      coreMigrations.filter((m) => !secretsApart(m)),
    );
    const token = 'svc_pwd_0123456789abcdefghijABCDEFGHIJ0123456789abc';
    await db.query("INSERT INTO mail_outbox (id, sender, recipient, subject, text_body, html_body) VALUES (gen_random_uuid(), 's', 'a@b.test', 'Invite', $1, $2)", [
      `{"token": "${token}"}`,
      `<p>${token}</p>`,
    ]);
    await runMigrations(db, coreMigrations);
    const { rows } = await db.query<{ text_body: string; html_body: string }>('SELECT text_body, html_body FROM mail_outbox');
    t.same(rows, [{ text_body: '{"token": "[removed: invite again]"}', html_body: '<p>[removed: invite again]</p>' }]);
  });
}

t.test('SMTP', async (t) => {
  const smtp = await startFakeSmtpServer({ requireAuth: 'mailer:hunter2-smtp' });
  t.teardown(() => smtp.close());
  const mailer = new SmtpMailer(smtpConfig({ host: '127.0.0.1', port: smtp.port, secure: false, auth: { user: 'mailer', pass: 'hunter2-smtp' } }));
  t.teardown(() => mailer.close());

  t.test('delivers a message with its sender, recipient, subject, text and html, authenticated', async (t) => {
    const arriving = smtp.nextMessage();
    const sent = await mailer.send({ to: 'ada@example.com', subject: 'Your sign-in code', text: 'Code: 123456', html: '<p>Code: <b>123456</b></p>' });
    const mail = await arriving;
    t.ok(sent.id);
    t.equal(mail.auth, 'mailer:hunter2-smtp');
    t.equal(mail.from, 'no-reply@svc.test');
    t.same(mail.to, ['ada@example.com']);
    t.match(mail.data, /^Subject: Your sign-in code\r$/m);
    t.match(mail.data, /^From: svc <no-reply@svc\.test>\r$/m);
    t.match(mail.data, /Code: 123456/);
    t.match(mail.data, /<b>123456<\/b>/);
  });

  t.test("delivers a message's secrets in place, in its text and html", async (t) => {
    const arriving = smtp.nextMessage();
    const token = 'svc_pwd_AAAAbbbbCCCCddddEEEEffffGGGGhhhhIIIIjjjjKKK';
    await mailer.send({ to: 'ada@example.com', subject: 'Set your password', text: 'Token: {{token}}', html: '<p>{{token}}</p>', secrets: { token } });
    const mail = await arriving;
    t.match(mail.data, /Token: svc_pwd_AAAAbbbb/);
    t.match(mail.data, /<p>svc_pwd_AAAAbbbb/);
    t.notMatch(mail.data, /\{\{token\}\}/);
  });

  t.test('a URL configures the same delivery', async (t) => {
    const viaUrl = new SmtpMailer(smtpConfig({ url: `smtp://mailer:hunter2-smtp@127.0.0.1:${smtp.port}` }));
    t.teardown(() => viaUrl.close());
    const arriving = smtp.nextMessage();
    await viaUrl.send({ to: 'bob@example.com', subject: 'Invitation', text: 'Join us' });
    t.same((await arriving).to, ['bob@example.com']);
  });

  t.test('a permanent refusal is not retryable, a temporary one is, and neither names the password', async (t) => {
    smtp.refuseNext('RCPT', '550 5.1.1 no such mailbox');
    const permanent = await mailer.send({ to: 'gone@example.com', subject: 's', text: 't' }).catch((error: unknown) => error);
    t.type(permanent, MailDeliveryError);
    t.equal((permanent as MailDeliveryError).retryable, false);
    t.match((permanent as Error).message, /no such mailbox/);
    smtp.refuseNext('MAIL', '451 4.3.0 try again later');
    const temporary = await mailer.send({ to: 'ada@example.com', subject: 's', text: 't' }).catch((error: unknown) => error);
    t.equal((temporary as MailDeliveryError).retryable, true);
    for (const error of [permanent, temporary]) t.notMatch((error as Error).message, /hunter2/);
  });

  t.test('wrong credentials are a failure that retrying will not fix', async (t) => {
    const wrong = new SmtpMailer(smtpConfig({ host: '127.0.0.1', port: smtp.port, auth: { user: 'mailer', pass: 'wrong-pass' } }));
    t.teardown(() => wrong.close());
    const error = await wrong.send({ to: 'ada@example.com', subject: 's', text: 't' }).catch((e: unknown) => e);
    t.type(error, MailDeliveryError);
    t.equal((error as MailDeliveryError).retryable, false);
    t.notMatch((error as Error).message, /wrong-pass/);
  });

  t.test('a server that cannot be reached is worth retrying', async (t) => {
    const closed = await startFakeSmtpServer();
    const port = closed.port;
    await closed.close();
    const unreachable = new SmtpMailer(smtpConfig({ host: '127.0.0.1', port }));
    t.teardown(() => unreachable.close());
    const error = await unreachable.send({ to: 'ada@example.com', subject: 's', text: 't' }).catch((e: unknown) => e);
    t.type(error, MailDeliveryError);
    t.equal((error as MailDeliveryError).retryable, true);
  });
});

t.test('the kernel binds the local outbox by default and SMTP when configured', async (t) => {
  const embedded = await buildTestApp(t, { plugins: {} });
  t.type(embedded.app.svc.container.resolve(Tokens.Mailer), SqlMailOutbox);
  const smtp = await buildTestApp(t, { plugins: {}, config: { mail: { driver: 'smtp', host: '127.0.0.1', port: 2525, from: 'svc@svc.test' } } });
  t.type(smtp.app.svc.container.resolve(Tokens.Mailer), SmtpMailer);
});

t.test('SMTP settings name a server once: a url or a host', async (t) => {
  t.throws(() => parseConfig({ mail: { driver: 'smtp', from: 'svc@svc.test' } }), /mail\.host: give either url or host/);
  t.throws(() => parseConfig({ mail: { driver: 'smtp', from: 'svc@svc.test', url: 'smtp://x', host: 'x' } }), /mail\.host: give either url or host/);
  t.throws(() => parseConfig({ mail: { driver: 'smtp', from: 'svc@svc.test', url: 'http://x' } }), /mail\.url/);
});
