import t from 'tap';
import { newRequestId, requestIdIssuedAt } from '../../core/kernel/request-ids.ts';

t.test('a request id is req_ and 32 lowercase hex digits', async (t) => {
  t.match(newRequestId(), /^req_[0-9a-f]{32}$/);
});

t.test('request ids sort by the millisecond they were issued in', async (t) => {
  const earlier = newRequestId(Date.UTC(2026, 10, 21, 12, 0, 0, 0));
  const later = newRequestId(Date.UTC(2026, 10, 21, 12, 0, 0, 1));
  t.ok(earlier < later);
});

t.test('request ids issued in the same millisecond differ (random part), also across pool refills', async (t) => {
  const now = Date.now();
  const ids = new Set<string>();
  for (let i = 0; i < 2_000; i += 1) ids.add(newRequestId(now));
  t.equal(ids.size, 2_000);
  const randomParts = new Set([...ids].map((id) => id.slice(16)));
  t.equal(randomParts.size, 2_000, 'no random part repeats after the pool is refilled');
});

t.test('an id, or a prefix of 16 characters or more, tells the millisecond it was issued in', async (t) => {
  const at = Date.UTC(2026, 10, 27, 14, 30, 0, 123);
  const id = newRequestId(at);
  t.equal(requestIdIssuedAt(id), at);
  t.equal(requestIdIssuedAt(id.slice(0, 16)), at);
  t.equal(requestIdIssuedAt(id.slice(0, 15)), null, 'too short to hold the whole time');
  t.equal(requestIdIssuedAt(`REQ_${id.slice(4)}`), null);
  t.equal(requestIdIssuedAt('chatcmpl-123456789012345'), null);
});
