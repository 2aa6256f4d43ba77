import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { API, startTestApp, type TestApp } from '../../../testing/harness.ts';

let t: TestApp;
before(async () => { t = await startTestApp(); });
after(async () => { await t.close(); });

test('a burst of L is accepted, then 429 rate_limited with Retry-After and the headers', async () => {
  const limit = 5;
  const u = await t.user({ rateLimit: limit });
  for (let i = 0; i < limit; i++) {
    const res = await t.inject({ method: 'GET', url: `${API}/agents`, headers: u.auth });
    assert.equal(res.statusCode, 200, `request ${i + 1} of the burst`);
  }
  const refused = await t.inject({ method: 'GET', url: `${API}/agents`, headers: u.auth });
  assert.equal(refused.statusCode, 429);
  assert.equal(refused.headers['content-type'], 'application/problem+json; charset=utf-8');
  const body = refused.json();
  assert.equal(body.code, 'rate_limited');
  assert.equal(body.status, 429);
  const retryAfter = Number(refused.headers['retry-after']);
  assert.ok(Number.isInteger(retryAfter) && retryAfter >= 1 && retryAfter <= 60, `Retry-After ${refused.headers['retry-after']}`);
  assert.equal(refused.headers['ratelimit-policy'], `"key";q=${limit};w=60`);
  assert.equal(refused.headers['ratelimit'], `"key";r=0;t=${retryAfter}`);
});

test('the limit is checked before the body: an over-limit key with a bad body gets 429, not 400', async () => {
  const u = await t.user({ rateLimit: 1 });
  await t.inject({ method: 'GET', url: `${API}/agents`, headers: u.auth });
  const res = await t.inject({
    method: 'POST', url: `${API}/agents`, headers: { ...u.auth, 'content-type': 'application/json' }, payload: '{oops',
  });
  assert.equal(res.statusCode, 429);
});

// That refused requests use up nothing and that the window rolls is proven with a controlled
// clock in src/ratelimit/memory.test.ts.

test('every authenticated request counts, whatever its outcome', async () => {
  const u = await t.user({ rateLimit: 3 });
  const outcomes = [
    await t.inject({ method: 'POST', url: `${API}/agents`, headers: u.auth, payload: { agent_name: '' } }),
    await t.inject({ method: 'POST', url: `${API}/agents`, headers: u.auth, payload: { agent_name: 'x', workspace_id: 'wsp_nope0000000000000000000' } }),
    await t.inject({ method: 'POST', url: `${API}/agents`, headers: { ...u.auth, 'content-type': 'application/json' }, payload: '[' }),
  ];
  assert.deepEqual(outcomes.map((r) => r.statusCode), [422, 404, 400]);
  assert.equal((await t.inject({ method: 'GET', url: `${API}/agents`, headers: u.auth })).statusCode, 429);
});

test('a rate limit store that cannot be reached (Redis down): 503 service_unavailable with Retry-After, and the message is not taken', async () => {
  const down = await startTestApp({ rateLimitStore: 'redis', redisUrl: 'redis://127.0.0.1:1' });
  try {
    const u = await down.userWithAgent();
    for (const request of [
      { method: 'GET' as const, url: `${API}/agents` },
      { method: 'POST' as const, url: `${API}/messages`, payload: { text: 'not counted, not sent', agent_id: u.agentId } },
    ]) {
      const res = await down.inject({ ...request, headers: u.auth });
      assert.equal(res.statusCode, 503, res.body);
      assert.equal(res.headers['retry-after'], '1');
      assert.equal(res.headers['content-type'], 'application/problem+json; charset=utf-8');
      assert.equal(res.json().code, 'service_unavailable');
    }
    const sessions = await down.runtime.store.db.selectFrom('sessions').select('id').where('user_id', '=', u.id).execute();
    assert.deepEqual(sessions, [], 'the message was not taken');
  } finally {
    await down.close();
  }
});
