import t from 'tap';
import { cancellationOf, GatewayCallOptions } from '../../core/gateway/call-options.ts';
import { CallSignal, onCancel } from '../../core/gateway/call-signal.ts';
import type { CallOptions } from '../../core/gateway/provider.ts';

t.test('abort runs each listener once with the reason, and later aborts change nothing', async (t) => {
  const call = new CallSignal();
  const seen: unknown[] = [];
  call.onAbort((reason) => seen.push(reason));
  call.abort('first');
  call.abort('second');
  t.same(seen, ['first']);
  t.equal(call.aborted, true);
  t.equal(call.reason, 'first');
});

t.test('a removed listener is not called', async (t) => {
  const call = new CallSignal();
  let called = false;
  const off = call.onAbort(() => (called = true));
  off();
  call.abort('gone');
  t.equal(called, false);
});

t.test('the AbortSignal view aborts with it, also when asked for after the abort', async (t) => {
  const before = new CallSignal();
  const signal = before.signal;
  t.equal(signal.aborted, false);
  before.abort('gone');
  t.equal(signal.aborted, true);
  t.equal(signal.reason, 'gone');
  const after = new CallSignal();
  after.abort('late');
  t.equal(after.signal.aborted, true);
  t.equal(after.signal.reason, 'late');
});

t.test('a child aborts with its parent, alone, and stops following once detached', async (t) => {
  const parent = new CallSignal();
  const first = parent.child();
  first.signal.abort('attempt cut');
  t.equal(parent.aborted, false, 'a child never aborts its parent');
  const second = parent.child();
  second.detach();
  const third = parent.child();
  parent.abort('client gone');
  t.equal(third.signal.reason, 'client gone');
  t.equal(second.signal.aborted, false);
});

t.test('onCancel listens to a CallSignal and to an AbortSignal alike', async (t) => {
  const call = new CallSignal();
  const controller = new AbortController();
  let count = 0;
  onCancel(call, () => (count += 1));
  onCancel(controller.signal, () => (count += 1));
  const removedFrom = new AbortController();
  const removedFromCall = new CallSignal();
  onCancel(removedFrom.signal, () => (count += 100))();
  onCancel(removedFromCall, () => (count += 100))();
  call.abort('x');
  controller.abort('y');
  removedFrom.abort('z');
  removedFromCall.abort('z');
  t.equal(count, 2, 'removed listeners of either kind are not called');
});

t.test("a provider's call options show a standard signal and no kernel cancellation", async (t) => {
  const cancel = new CallSignal();
  const options: CallOptions = new GatewayCallOptions(cancel, 'req-1');
  t.ok(options.signal instanceof AbortSignal);
  t.equal(options.requestId, 'req-1');
  t.notOk('cancel' in options, 'no `cancel` member');
  t.same(Object.keys(options), ['requestId', 'traceHeaders'], 'nothing else enumerable: the public contract’s fields');
  // @ts-expect-error the public contract has no `cancel`
  void options.cancel;
  cancel.abort(new Error('gone'));
  t.ok(options.signal.aborted, 'the signal follows the call');
});

t.test('the kernel reaches the cheap cancellation behind its own options, and a plain signal otherwise', async (t) => {
  const cancel = new CallSignal();
  t.equal(cancellationOf(new GatewayCallOptions(cancel, 'r')), cancel);
  const signal = new AbortController().signal;
  t.equal(cancellationOf({ signal, requestId: 'r' }), signal);
});
