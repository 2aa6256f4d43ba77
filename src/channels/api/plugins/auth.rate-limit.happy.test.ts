import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { LightMyRequestResponse } from 'fastify';
import { API, freshDatabase, startTestApp, withTestApp, type TestApp } from '../../../testing/harness.ts';

let t: TestApp;
before(async () => { t = await startTestApp(); });
after(async () => { await t.close(); });

/** The `r` (remaining) and `t` (seconds until next sure acceptance) of a RateLimit header. */
function rateLimitOf(res: LightMyRequestResponse): { r: number; t: number } {
  const match = /^"key";r=(\d+);t=(\d+)$/.exec(String(res.headers['ratelimit']));
  assert.ok(match, `RateLimit header: ${res.headers['ratelimit']}`);
  return { r: Number(match[1]), t: Number(match[2]) };
}

test('every authenticated response carries RateLimit-Policy and RateLimit, errors included', async () => {
  const u = await t.user({ rateLimit: 50 });
  const responses = [
    await t.inject({ method: 'GET', url: `${API}/agents`, headers: u.auth }), // 200
    await t.inject({ method: 'POST', url: `${API}/agents`, headers: u.auth, payload: { agent_name: 'a' } }), // 201
    await t.inject({ method: 'POST', url: `${API}/agents`, headers: u.auth, payload: { agent_name: '' } }), // 422
    await t.inject({ method: 'POST', url: `${API}/agents`, headers: u.auth, payload: { agent_name: 'b', workspace_id: 'wsp_nope0000000000000000000' } }), // 404
    await t.inject({ method: 'POST', url: `${API}/agents`, headers: u.auth, payload: { agent_name: 'c' } }), // 403 limit
    await t.inject({ method: 'POST', url: `${API}/agents`, headers: { ...u.auth, 'content-type': 'application/json' }, payload: '{' }), // 400
    await t.inject({ method: 'POST', url: `${API}/agents`, headers: { ...u.auth, 'content-type': 'text/plain' }, payload: 'hi' }), // 415
  ];
  assert.deepEqual(responses.map((r) => r.statusCode), [200, 201, 422, 404, 403, 400, 415]);
  responses.forEach((res, i) => {
    assert.equal(res.headers['ratelimit-policy'], '"key";q=50;w=60');
    assert.deepEqual(rateLimitOf(res), { r: 50 - (i + 1), t: 0 }, `response ${i}`);
  });
});

test('the limit fixed into the key at creation is the one announced', async () => {
  const u = await t.user({ rateLimit: 7 });
  const res = await t.inject({ method: 'GET', url: `${API}/agents`, headers: u.auth });
  assert.equal(res.headers['ratelimit-policy'], '"key";q=7;w=60');
  assert.deepEqual(rateLimitOf(res), { r: 6, t: 0 });
});

test('a key created without a limit gets the server default, 60', async () => {
  const u = await t.user();
  const { token } = await t.runtime.services.keys.create(u.id, { label: 'default limit' });
  const res = await t.inject({ method: 'GET', url: `${API}/agents`, headers: { authorization: `Bearer ${token}` } });
  assert.equal(res.headers['ratelimit-policy'], '"key";q=60;w=60');
});

test('a key made under a higher server maximum runs at the maximum once it is lowered', async () => {
  const database = await freshDatabase();
  try {
    // An operator raised the maximum for a load test and made a key at 500 a minute…
    const { u } = await withTestApp(async (raised) => ({ u: await raised.user({ rateLimit: 500 }) }), { maxRateLimitPerMinute: 1000 }, { database });
    // …then restarted with the maximum at 5 again.
    await withTestApp(async (lowered) => {
      const answers = [];
      for (let i = 0; i < 6; i++) answers.push(await lowered.inject({ method: 'GET', url: `${API}/agents`, headers: u.auth }));
      assert.deepEqual(answers.map((res) => res.statusCode), [200, 200, 200, 200, 200, 429]);
      assert.equal(answers[0]!.headers['ratelimit-policy'], '"key";q=5;w=60');
      // The owner sees the limit the key runs at.
      const [view] = await lowered.runtime.services.keys.list(u.id);
      assert.equal(view!.rate_limit, 5);
    }, { maxRateLimitPerMinute: 5 }, { database });
  } finally {
    await database.drop();
  }
});
