import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { API, startTestApp, type TestApp } from '../../../testing/harness.ts';

let t: TestApp;
let base: string;
before(async () => {
  t = await startTestApp();
  await t.app.listen({ port: 0, host: '127.0.0.1' });
  const address = t.app.server.address();
  assert.ok(address && typeof address === 'object');
  base = `http://127.0.0.1:${address.port}`;
});
after(async () => { await t.close(); });

test('an event stream is open as soon as it is accepted, before its first event or heartbeat', async () => {
  const u = await t.user();
  const hangUp = new AbortController();
  const started = Date.now();
  try {
    const res = await fetch(`${base}${API}/events`, { headers: { ...u.auth, accept: 'text/event-stream' }, signal: hangUp.signal });
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('content-type'), 'text/event-stream');
    // The heartbeat comes after 10 s: the answer's head is not held back until then.
    assert.ok(Date.now() - started < 5_000, `open in ${Date.now() - started} ms`);
  } finally {
    hangUp.abort();
  }
});
