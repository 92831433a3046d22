import t from 'tap';
import { addressBucket } from '../../core/net/address-bucket.ts';

t.test('an IPv4 address is its own bucket', async (t) => {
  t.equal(addressBucket('203.0.113.9'), '203.0.113.9');
  t.equal(addressBucket('::ffff:203.0.113.9'), '203.0.113.9', 'also as a dual-stack socket reports it');
});

t.test('IPv6 addresses of one /64 share a bucket, whichever way they are written', async (t) => {
  const bucket = '2001:db8:85a3:1::/64';
  for (const ip of ['2001:db8:85a3:1::1', '2001:0db8:85a3:0001:ffff:ffff:ffff:ffff', '2001:DB8:85A3:1:0:0:0:2', '2001:db8:85a3:1::1%eth0', '2001:db8:85a3:1::192.0.2.1']) {
    t.equal(addressBucket(ip), bucket, ip);
  }
  t.equal(addressBucket('2001:db8:85a3:2::1'), '2001:db8:85a3:2::/64', 'the next /64 is another client');
  t.equal(addressBucket('::1'), '0:0:0:0::/64');
  t.equal(addressBucket('fe80::1:2:3:4'), 'fe80:0:0:0::/64');
});
