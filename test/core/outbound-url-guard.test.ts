import t from 'tap';
import type { LookupFunction } from 'node:net';
import {
  assertPublicUrl,
  assertPublicUrlSync,
  createOutboundUrlChecker,
  guardedConnectOptions,
  guardedLookup,
  isPrivateAddress,
  OutboundUrlRefusedError,
} from '../../core/net/outbound-url-guard.ts';

function refusalReason(check: () => unknown): string | null {
  try {
    check();
    return null;
  } catch (error) {
    return error instanceof OutboundUrlRefusedError ? error.reason : 'not-a-refusal';
  }
}

const refused = (url: string) => {
  try {
    assertPublicUrlSync(url);
    return false;
  } catch (error) {
    return error instanceof OutboundUrlRefusedError;
  }
};

t.test('refuses non-http schemes', async (t) => {
  for (const url of ['file:///etc/passwd', 'ftp://example.com/', 'gopher://example.com/', 'javascript:alert(1)', 'data:text/plain,hi']) {
    t.equal(
      refusalReason(() => assertPublicUrlSync(url)),
      'scheme',
      url,
    );
  }
});

t.test('refuses text that is not a URL', async (t) => {
  t.equal(
    refusalReason(() => assertPublicUrlSync('not a url')),
    'invalid_url',
  );
});

t.test('allows public http and https URLs', async (t) => {
  for (const url of ['https://api.openai.com/v1', 'http://example.com:8080/x', 'https://8.8.8.8/', 'https://[2606:4700:4700::1111]/']) {
    t.equal(assertPublicUrlSync(url).href, new URL(url).href, url);
  }
});

t.test('refuses private, loopback, link-local, CGNAT and reserved IPv4 literals', async (t) => {
  const hosts = [
    '127.0.0.1',
    '127.255.255.254',
    '10.0.0.1',
    '10.255.255.255',
    '172.16.0.1',
    '172.31.255.255',
    '192.168.1.1',
    '169.254.169.254',
    '100.64.0.1',
    '100.127.255.255',
    '0.0.0.0',
    '0.1.2.3',
    '224.0.0.1',
    '239.255.255.250',
    '255.255.255.255',
    '240.0.0.1',
    '198.18.0.1',
    '192.0.2.1',
  ];
  for (const host of hosts) t.ok(refused(`http://${host}/`), host);
});

t.test('allows public IPv4 addresses at the edges of private ranges', async (t) => {
  for (const host of ['172.15.255.255', '172.32.0.0', '100.63.255.255', '100.128.0.0', '11.0.0.1', '169.253.255.255', '1.1.1.1']) {
    t.notOk(refused(`http://${host}/`), host);
  }
});

t.test('refuses IPv4 literals in every notation the URL parser accepts', async (t) => {
  const spellings = [
    'http://2130706433/',
    'http://0x7f000001/',
    'http://0x7f.1/',
    'http://017700000001/',
    'http://0177.0.0.1/',
    'http://127.1/',
    'http://0/',
    'http://0xA9.0xFE.0xA9.0xFE/',
    'http://169.254.43518/',
    'http://127.0.0.1./',
    'http://%31%32%37.0.0.1/',
    'http://\u2460\u2461\u2466.0.0.1/',
  ];
  for (const url of spellings) t.ok(refused(url), url);
});

t.test('refuses IPv6 loopback, unspecified, unique-local, link-local and multicast literals', async (t) => {
  for (const host of ['::1', '::', 'fc00::1', 'fd12:3456::1', 'fe80::1', 'febf::1', 'ff02::1', 'fec0::1', '0:0:0:0:0:0:0:1']) {
    t.ok(refused(`http://[${host}]/`), host);
  }
});

t.test('refuses IPv4-mapped, translated, NAT64 and 6to4 forms of private IPv4', async (t) => {
  for (const host of ['::ffff:127.0.0.1', '::ffff:7f00:1', '::ffff:169.254.169.254', '::ffff:10.0.0.1', '::ffff:0:192.168.0.1', '64:ff9b::10.0.0.1', '2002:7f00:1::', '::127.0.0.1']) {
    t.ok(refused(`http://[${host}]/`), host);
  }
  t.notOk(refused('http://[::ffff:8.8.8.8]/'), 'mapped public address');
  t.notOk(refused('http://[64:ff9b::8.8.8.8]/'), 'NAT64 public address');
});

t.test('refuses localhost names without resolving them', async (t) => {
  for (const url of ['http://localhost/', 'http://LOCALHOST:8080/', 'http://api.localhost/', 'http://localhost./']) t.ok(refused(url), url);
});

t.test('allowPrivate lets private addresses through but still checks the scheme', async (t) => {
  t.equal(assertPublicUrlSync('http://127.0.0.1:8000/v1', { allowPrivate: true }).hostname, '127.0.0.1');
  t.equal(
    refusalReason(() => assertPublicUrlSync('file:///etc/passwd', { allowPrivate: true })),
    'scheme',
  );
});

t.test('isPrivateAddress classifies bare and bracketed addresses and ignores names', async (t) => {
  t.ok(isPrivateAddress('[::1]'));
  t.ok(isPrivateAddress('fe80::1%eth0'));
  t.notOk(isPrivateAddress('2606:4700:4700::1111'));
  t.notOk(isPrivateAddress('example.com'));
});

t.test('assertPublicUrl refuses a hostname that resolves to a private address', async (t) => {
  const lookupAll = async () => [
    { address: '93.184.216.34', family: 4 },
    { address: '10.1.2.3', family: 4 },
  ];
  await t.rejects(assertPublicUrl('https://rebind.example/', { lookupAll }), { reason: 'private_address', message: /10\.1\.2\.3/ });
});

t.test('assertPublicUrl accepts a hostname that resolves only to public addresses', async (t) => {
  const lookupAll = async () => [
    { address: '93.184.216.34', family: 4 },
    { address: '2606:2800:220:1::1', family: 6 },
  ];
  const url = await assertPublicUrl('https://example.com/hook', { lookupAll });
  t.equal(url.hostname, 'example.com');
});

t.test('assertPublicUrl skips resolution when private networks are allowed', async (t) => {
  const lookupAll = async () => {
    throw new Error('should not resolve');
  };
  await t.resolves(assertPublicUrl('http://vllm.lan:8000/', { allowPrivate: true, lookupAll }));
});

const fakeLookup = (answer: string | Array<{ address: string; family: number }>): LookupFunction =>
  ((_hostname: string, _options: unknown, callback: (error: NodeJS.ErrnoException | null, address: string | Array<{ address: string; family: number }>, family?: number) => void) => {
    callback(null, answer, typeof answer === 'string' ? 4 : undefined);
  }) as unknown as LookupFunction;

t.test('guardedLookup refuses a private answer at connect time (DNS rebinding)', async (t) => {
  const lookup = guardedLookup(fakeLookup('169.254.169.254'));
  const error = await new Promise<unknown>((resolve) => lookup('metadata.example', { family: 0 }, (err) => resolve(err)));
  t.type(error, OutboundUrlRefusedError);
});

t.test('guardedLookup refuses when any of several answers is private', async (t) => {
  const lookup = guardedLookup(
    fakeLookup([
      { address: '8.8.8.8', family: 4 },
      { address: '::1', family: 6 },
    ]),
  );
  const error = await new Promise<unknown>((resolve) => lookup('mixed.example', { all: true }, (err) => resolve(err)));
  t.type(error, OutboundUrlRefusedError);
});

t.test('guardedLookup passes public answers through unchanged', async (t) => {
  const lookup = guardedLookup(fakeLookup([{ address: '8.8.8.8', family: 4 }]));
  const result = await new Promise<unknown>((resolve) => lookup('public.example', { all: true }, (err, address) => resolve(err ?? address)));
  t.same(result, [{ address: '8.8.8.8', family: 4 }]);
});

t.test('createOutboundUrlChecker is the sync checker a ProviderContext exposes', async (t) => {
  const check = createOutboundUrlChecker();
  t.throws(() => check('http://10.0.0.5/v1'), OutboundUrlRefusedError);
  t.doesNotThrow(() => check('https://api.anthropic.com'));
  t.doesNotThrow(() => createOutboundUrlChecker({ allowPrivate: true })('http://10.0.0.5/v1'));
});

// Every range the guard blocks, written out here rather than read from the guard: its first and last
// address are refused, bare and in every IPv6 form that embeds an IPv4 address, and its public
// neighbours (where the next address is not itself in a blocked range) are let through, so a range
// dropped, narrowed or widened fails a test.
const BLOCKED_IPV4: ReadonlyArray<{ range: string; first: string; last: string; publicNeighbours: string[] }> = [
  { range: '0.0.0.0/8', first: '0.0.0.0', last: '0.255.255.255', publicNeighbours: ['1.0.0.0'] },
  { range: '10.0.0.0/8', first: '10.0.0.0', last: '10.255.255.255', publicNeighbours: ['9.255.255.255', '11.0.0.0'] },
  { range: '100.64.0.0/10', first: '100.64.0.0', last: '100.127.255.255', publicNeighbours: ['100.63.255.255', '100.128.0.0'] },
  { range: '127.0.0.0/8', first: '127.0.0.0', last: '127.255.255.255', publicNeighbours: ['126.255.255.255', '128.0.0.0'] },
  { range: '169.254.0.0/16', first: '169.254.0.0', last: '169.254.255.255', publicNeighbours: ['169.253.255.255', '169.255.0.0'] },
  { range: '172.16.0.0/12', first: '172.16.0.0', last: '172.31.255.255', publicNeighbours: ['172.15.255.255', '172.32.0.0'] },
  { range: '192.0.0.0/24', first: '192.0.0.0', last: '192.0.0.255', publicNeighbours: ['191.255.255.255', '192.0.1.0'] },
  { range: '192.0.2.0/24', first: '192.0.2.0', last: '192.0.2.255', publicNeighbours: ['192.0.1.255', '192.0.3.0'] },
  { range: '192.88.99.0/24', first: '192.88.99.0', last: '192.88.99.255', publicNeighbours: ['192.88.98.255', '192.88.100.0'] },
  { range: '192.168.0.0/16', first: '192.168.0.0', last: '192.168.255.255', publicNeighbours: ['192.167.255.255', '192.169.0.0'] },
  { range: '198.18.0.0/15', first: '198.18.0.0', last: '198.19.255.255', publicNeighbours: ['198.17.255.255', '198.20.0.0'] },
  { range: '198.51.100.0/24', first: '198.51.100.0', last: '198.51.100.255', publicNeighbours: ['198.51.99.255', '198.51.101.0'] },
  { range: '203.0.113.0/24', first: '203.0.113.0', last: '203.0.113.255', publicNeighbours: ['203.0.112.255', '203.0.114.0'] },
  { range: '224.0.0.0/4', first: '224.0.0.0', last: '239.255.255.255', publicNeighbours: ['223.255.255.255'] },
  { range: '240.0.0.0/4', first: '240.0.0.0', last: '255.255.255.255', publicNeighbours: [] },
];

const BLOCKED_IPV6: ReadonlyArray<{ range: string; first: string; last: string; publicNeighbours: string[] }> = [
  { range: '::/96 (unspecified, loopback, IPv4-compatible)', first: '::', last: '::ffff:ffff', publicNeighbours: ['::1:0:0', '::1:0:0:0'] },
  { range: '64:ff9b:1::/48 (local-use NAT64)', first: '64:ff9b:1::', last: '64:ff9b:1:ffff:ffff:ffff:ffff:ffff', publicNeighbours: ['64:ff9b:0:ffff::', '64:ff9b:2::'] },
  { range: '2001::/32 (Teredo)', first: '2001::', last: '2001:0:ffff:ffff:ffff:ffff:ffff:ffff', publicNeighbours: ['2000:ffff:ffff:ffff:ffff:ffff:ffff:ffff', '2001:1::'] },
  { range: '2001:db8::/32 (documentation)', first: '2001:db8::', last: '2001:db8:ffff:ffff:ffff:ffff:ffff:ffff', publicNeighbours: ['2001:db7:ffff:ffff:ffff:ffff:ffff:ffff', '2001:db9::'] },
  { range: '100::/64 (discard-only)', first: '100::', last: '100::ffff:ffff:ffff:ffff', publicNeighbours: ['ff:ffff:ffff:ffff:ffff:ffff:ffff:ffff', '100:0:0:1::'] },
  { range: 'fc00::/7 (unique local)', first: 'fc00::', last: 'fdff:ffff:ffff:ffff:ffff:ffff:ffff:ffff', publicNeighbours: ['fbff:ffff:ffff:ffff:ffff:ffff:ffff:ffff', 'fe00::'] },
  { range: 'fe80::/10 (link-local)', first: 'fe80::', last: 'febf:ffff:ffff:ffff:ffff:ffff:ffff:ffff', publicNeighbours: ['fe7f:ffff:ffff:ffff:ffff:ffff:ffff:ffff'] },
  { range: 'fec0::/10 (site-local)', first: 'fec0::', last: 'feff:ffff:ffff:ffff:ffff:ffff:ffff:ffff', publicNeighbours: [] },
  { range: 'ff00::/8 (multicast)', first: 'ff00::', last: 'ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff', publicNeighbours: [] },
];

/** The IPv6 spellings that carry an IPv4 address a translator or a dual-stack socket would dial. */
function ipv6FormsOf(ipv4: string): Record<string, string> {
  const [a = 0, b = 0, c = 0, d = 0] = ipv4.split('.').map(Number);
  const hex = (high: number, low: number) => (high * 256 + low).toString(16);
  return {
    mapped: `::ffff:${ipv4}`,
    'mapped, hex': `::ffff:${hex(a, b)}:${hex(c, d)}`,
    translated: `::ffff:0:${ipv4}`,
    NAT64: `64:ff9b::${ipv4}`,
    '6to4': `2002:${hex(a, b)}:${hex(c, d)}::1`,
  };
}

t.test('refuses the first and last address of every blocked IPv4 range, bare and as a URL', async (t) => {
  for (const { range, first, last } of BLOCKED_IPV4) {
    for (const address of [first, last]) {
      t.ok(isPrivateAddress(address), `${range}: ${address}`);
      t.ok(refused(`http://${address}/`), `${range}: http://${address}/`);
    }
  }
});

t.test('allows the public neighbours of every blocked IPv4 range', async (t) => {
  for (const { range, publicNeighbours } of BLOCKED_IPV4) {
    for (const address of publicNeighbours) t.notOk(isPrivateAddress(address), `${range}: ${address}`);
  }
});

t.test('refuses every blocked IPv4 range in its mapped, translated, NAT64 and 6to4 forms', async (t) => {
  for (const { range, first, last } of BLOCKED_IPV4) {
    for (const address of [first, last]) {
      for (const [form, spelled] of Object.entries(ipv6FormsOf(address))) {
        t.ok(isPrivateAddress(spelled), `${range} ${form}: ${spelled}`);
        t.ok(refused(`http://[${spelled}]/`), `${range} ${form}: http://[${spelled}]/`);
      }
    }
  }
});

t.test('allows the public neighbours of every blocked IPv4 range in the IPv6 forms that embed them', async (t) => {
  for (const { range, publicNeighbours } of BLOCKED_IPV4) {
    for (const address of publicNeighbours) {
      for (const [form, spelled] of Object.entries(ipv6FormsOf(address))) t.notOk(isPrivateAddress(spelled), `${range} ${form}: ${spelled}`);
    }
  }
});

t.test('refuses the first and last address of every blocked IPv6 range, bare and as a URL', async (t) => {
  for (const { range, first, last } of BLOCKED_IPV6) {
    for (const address of [first, last]) {
      t.ok(isPrivateAddress(address), `${range}: ${address}`);
      t.ok(refused(`http://[${address}]/`), `${range}: http://[${address}]/`);
    }
  }
});

t.test('allows the public neighbours of every blocked IPv6 range', async (t) => {
  for (const { range, publicNeighbours } of BLOCKED_IPV6) {
    for (const address of publicNeighbours) {
      t.notOk(isPrivateAddress(address), `${range}: ${address}`);
      t.notOk(refused(`http://[${address}]/`), `${range}: http://[${address}]/`);
    }
  }
});

t.test('a refusal names the address or host it refused and why', async (t) => {
  t.throws(() => assertPublicUrlSync('http://10.0.0.5/'), { reason: 'private_address', code: 'ERR_OUTBOUND_URL_REFUSED', message: /10\.0\.0\.5.*not a public internet address/ });
  t.throws(() => assertPublicUrlSync('http://api.localhost/'), { reason: 'private_address', message: /api\.localhost.*local host/ });
  t.throws(() => assertPublicUrlSync('ftp://example.com/'), { reason: 'scheme', message: /not ftp$/ });
  t.throws(() => assertPublicUrlSync('not a url'), { reason: 'invalid_url', name: 'OutboundUrlRefusedError' });
});

t.test('a URL object is checked like its text', async (t) => {
  t.equal(
    refusalReason(() => assertPublicUrlSync(new URL('http://192.168.0.10/'))),
    'private_address',
  );
  t.equal(assertPublicUrlSync(new URL('https://example.com/x')).href, 'https://example.com/x');
});

t.test('a name that only ends like localhost is not refused as the local host', async (t) => {
  for (const url of ['http://notlocalhost/', 'http://localhost.example.com/', 'http://mylocalhost./']) t.notOk(refused(url), url);
  t.ok(refused('http://api.localhost./'), 'a subdomain of localhost with the root dot');
});

t.test('assertPublicUrl does not resolve an IP literal, and refuses a private one before resolving', async (t) => {
  const lookupAll = async () => {
    throw new Error('should not resolve');
  };
  t.equal((await assertPublicUrl('http://8.8.8.8/', { lookupAll })).hostname, '8.8.8.8');
  await t.rejects(assertPublicUrl('http://[fd00::1]/', { lookupAll }), { reason: 'private_address', message: /fd00::1/ });
});

t.test('guardedLookup passes a resolver error through and names the refused answer', async (t) => {
  const failing = ((_hostname: string, _options: unknown, callback: (error: NodeJS.ErrnoException | null, address?: string, family?: number) => void) => {
    callback(Object.assign(new Error('getaddrinfo ENOTFOUND'), { code: 'ENOTFOUND' }), undefined, undefined);
  }) as unknown as LookupFunction;
  const passed = await new Promise<unknown>((resolve) => guardedLookup(failing)('gone.example', {}, (err) => resolve(err)));
  t.match(passed, { code: 'ENOTFOUND' });
  const refusal = await new Promise<unknown>((resolve) => guardedLookup(fakeLookup('10.9.8.7'))('inside.example', {}, (err) => resolve(err)));
  t.match(refusal, { reason: 'private_address', message: /inside\.example.*10\.9\.8\.7/ });
  const answer = await new Promise<unknown[]>((resolve) => guardedLookup(fakeLookup('8.8.4.4'))('public.example', {}, (...args) => resolve(args)));
  t.same(answer, [null, '8.8.4.4', 4], 'a single public answer, error null');
});

t.test('guardedConnectOptions carries the guarded lookup for undici', async (t) => {
  const { lookup } = guardedConnectOptions(fakeLookup('127.0.0.1'));
  const error = await new Promise<unknown>((resolve) => lookup('loop.example', {}, (err) => resolve(err)));
  t.type(error, OutboundUrlRefusedError);
});
