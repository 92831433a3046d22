import { EventEmitter, once } from 'node:events';
import net, { type AddressInfo, type Socket } from 'node:net';

/**
 * A minimal SMTP server on 127.0.0.1 that speaks enough of RFC 5321 for a real client
 * (nodemailer): EHLO/HELO, AUTH PLAIN, MAIL, RCPT, DATA, RSET, NOOP, QUIT. No TLS, so it does not
 * offer STARTTLS. It records what arrives and can be told to refuse a command with a reply code.
 */
export interface ReceivedMail {
  from: string;
  to: string[];
  /** The message as sent after DATA (headers and body), dot-unstuffed. */
  data: string;
  /** `user:pass` from AUTH PLAIN, when the client authenticated. */
  auth: string | null;
}

export interface FakeSmtpServer {
  port: number;
  messages: ReceivedMail[];
  /** Answer the next command of this verb (MAIL, RCPT, DATA…) with this reply instead. */
  refuseNext(verb: string, reply: string): void;
  /** Resolves with the next message accepted. */
  nextMessage(): Promise<ReceivedMail>;
  close(): Promise<void>;
}

export async function startFakeSmtpServer(options: { requireAuth?: string } = {}): Promise<FakeSmtpServer> {
  const messages: ReceivedMail[] = [];
  const refusals = new Map<string, string>();
  const events = new EventEmitter();
  const sockets = new Set<Socket>();

  const server = net.createServer((socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => undefined);
    socket.setEncoding('utf8');
    const reply = (line: string) => socket.write(`${line}\r\n`);
    let buffer = '';
    let inData = false;
    let auth: string | null = null;
    let envelope: { from: string; to: string[] } | null = null;

    const command = (line: string) => {
      const verb = (line.split(/[ :]/)[0] ?? '').toUpperCase();
      const refusal = refusals.get(verb);
      if (refusal !== undefined) {
        refusals.delete(verb);
        return reply(refusal);
      }
      switch (verb) {
        case 'EHLO':
          return reply('250-fake.smtp.test\r\n250-AUTH PLAIN\r\n250-8BITMIME\r\n250 SMTPUTF8');
        case 'HELO':
          return reply('250 fake.smtp.test');
        case 'AUTH': {
          const [, mechanism, initial] = line.split(' ');
          if (mechanism?.toUpperCase() !== 'PLAIN' || initial === undefined) return reply('504 only AUTH PLAIN with an initial response');
          const [, user, pass] = Buffer.from(initial, 'base64').toString('utf8').split('\u0000');
          auth = `${user}:${pass}`;
          if (options.requireAuth !== undefined && auth !== options.requireAuth) return reply('535 authentication failed');
          return reply('235 authenticated');
        }
        case 'MAIL':
          if (options.requireAuth !== undefined && auth !== options.requireAuth) return reply('530 authentication required');
          envelope = { from: /<([^>]*)>/.exec(line)?.[1] ?? '', to: [] };
          return reply('250 sender ok');
        case 'RCPT':
          if (envelope === null) return reply('503 MAIL first');
          envelope.to.push(/<([^>]*)>/.exec(line)?.[1] ?? '');
          return reply('250 recipient ok');
        case 'DATA':
          if (envelope === null || envelope.to.length === 0) return reply('503 RCPT first');
          inData = true;
          return reply('354 end with <CRLF>.<CRLF>');
        case 'RSET':
          envelope = null;
          return reply('250 reset');
        case 'NOOP':
          return reply('250 ok');
        case 'QUIT':
          reply('221 bye');
          return socket.end();
        default:
          return reply('502 command not implemented');
      }
    };

    socket.on('data', (chunk: string) => {
      buffer += chunk;
      for (;;) {
        if (inData) {
          const end = buffer.indexOf('\r\n.\r\n');
          if (end === -1) return;
          const data = buffer.slice(0, end).replace(/^\.\./gm, '.');
          buffer = buffer.slice(end + 5);
          inData = false;
          const refusal = refusals.get('DATA-END');
          if (refusal !== undefined) {
            refusals.delete('DATA-END');
            reply(refusal);
            envelope = null;
            continue;
          }
          const mail: ReceivedMail = { from: envelope!.from, to: envelope!.to, data, auth };
          envelope = null;
          messages.push(mail);
          events.emit('message', mail);
          reply('250 queued');
          continue;
        }
        const newline = buffer.indexOf('\r\n');
        if (newline === -1) return;
        const line = buffer.slice(0, newline);
        buffer = buffer.slice(newline + 2);
        command(line);
      }
    });
    reply('220 fake.smtp.test ESMTP ready');
  });

  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return {
    port: (server.address() as AddressInfo).port,
    messages,
    refuseNext(verb, replyLine) {
      refusals.set(verb.toUpperCase(), replyLine);
    },
    nextMessage: () => once(events, 'message').then(([mail]) => mail as ReceivedMail),
    async close() {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
