import t from 'tap';
import { generateToken, SESSION_PREFIX } from '../../core/identity/api-tokens.ts';
import { buildTestApp, createKey } from '../helpers/app.ts';
import { eventually } from '../helpers/eventually.ts';
import { RawConnection } from '../helpers/raw-http.ts';

/*
 * Requests Node's HTTP parser refuses still carry whatever the client sent before the bad byte:
 * the parser error holds those bytes (`rawPacket`), a 431 the whole header block. At debug level
 * the refusal is logged; the credentials in those bytes must not be.
 */
const lines: string[] = [];
const test = await buildTestApp(t, {
  config: { server: { logLevel: 'debug' } },
  logStream: { write: (line) => void lines.push(line) },
});
await test.app.listen({ host: '127.0.0.1', port: 0 });
const key = (await createKey(test, { name: 'logged', scopes: ['inference', 'keys:read'] })).key;
const sessionToken = generateToken(SESSION_PREFIX);
const credentials = `Authorization: Bearer ${key}\r\nCookie: theme=dark; svc_session=${sessionToken}\r\n`;

/**
 * The spellings of `secret` found in `logged`: as text, as a Buffer's byte list (how JSON prints
 * one), in hex and in base64. Its last 16 characters are enough to give it away.
 */
function leaks(logged: string, secret: string): string[] {
  const part = Buffer.from(secret.slice(-16), 'latin1');
  const spellings = [part.toString('latin1'), [...part].join(','), part.toString('hex'), part.toString('base64').slice(0, 16)];
  return spellings.filter((spelling) => logged.includes(spelling));
}

const malformed: Array<[string, string, string]> = [
  ['a control character in a header line', `GET /client/whoami HTTP/1.1\r\nHost: x\r\n${credentials}X-Odd: a\x01b\r\n\r\n`, 'HPE_INVALID_HEADER_TOKEN'],
  ['headers over the size limit (431)', `GET /v1/models HTTP/1.1\r\nHost: x\r\n${credentials}X-Big: ${'a'.repeat(20 * 1024)}\r\n\r\n`, 'HPE_HEADER_OVERFLOW'],
  [
    'a broken chunked body',
    `POST /client/keys HTTP/1.1\r\nHost: x\r\n${credentials}Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n`,
    'HPE_INVALID_CHUNK_SIZE',
  ],
  ['a request line that is not HTTP', `GET /v1/models HTTP/9\x7f\r\nHost: x\r\n${credentials}\r\n`, 'HPE_INVALID_VERSION'],
];

for (const [label, request, code] of malformed) {
  t.test(`${label}: the debug log names the parser error, and holds neither the key nor the session cookie`, async (t) => {
    const from = lines.length;
    const connection = await RawConnection.open(test.app, request);
    await connection.closed;
    const refusal = await eventually(() => lines.slice(from).find((line) => line.includes('HTTP parser')), 'the parser refusal in the log');
    const logged = JSON.parse(refusal) as Record<string, unknown>;
    t.equal(logged.code, code, 'logged by code');
    t.type(logged.reason, 'string', 'and by reason');
    t.type(logged.offset, 'number', 'and by byte offset');
    const written = lines.slice(from).join('');
    t.same(leaks(written, key), [], 'the key is not in the log');
    t.same(leaks(written, sessionToken), [], 'the session cookie is not in the log');
  });
}

t.test('a parser error logged whole, as Fastify’s own handlers would, shows no bytes of the request', async (t) => {
  const from = lines.length;
  const parserError = Object.assign(new Error('Parse Error: Invalid header value char'), {
    code: 'HPE_INVALID_HEADER_TOKEN',
    bytesParsed: 40,
    rawPacket: Buffer.from(`GET / HTTP/1.1\r\n${credentials}`, 'latin1'),
  });
  test.app.log.debug({ err: parserError }, 'client error');
  test.app.log.debug(parserError);
  const written = lines.slice(from).join('');
  t.equal(lines.length - from, 2, 'both lines were logged');
  t.same(leaks(written, key), [], 'the key is not in the log');
  t.same(leaks(written, sessionToken), [], 'the session cookie is not in the log');
});
