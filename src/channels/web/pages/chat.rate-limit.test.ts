import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { startTestApp, withTestApp, type TestApp } from '../../../testing/harness.ts';
import { signedUpWithAgent } from '../../../testing/web-client.ts';

/** WEB_CHAT_RATE_LIMIT_PER_MINUTE: messages a signed-in person may send a minute through the chat. */
const LIMIT = 3;
let t: TestApp;
before(async () => { t = await startTestApp({ webChatRateLimitPerMinute: LIMIT }); });
after(async () => { await t.close(); });

const turnsOf = async (userId: string) => (await t.runtime.store.db.selectFrom('turns')
  .innerJoin('sessions', 'sessions.id', 'turns.session_id')
  .select('turns.text').where('sessions.user_id', '=', userId).where('turns.role', '=', 'user').execute()).map((r) => r.text);

const userIdOf = async (email: string) => (await t.runtime.store.db.selectFrom('users').select('id').where('email', '=', email).executeTakeFirstOrThrow()).id;

test('past the allowance a message is refused and not taken: 429 with Retry-After, said in JSON and on the page', async () => {
  const { web, email, agentId } = await signedUpWithAgent(t);
  await web.get('/chat');
  for (let i = 0; i < LIMIT; i++) {
    const res = await web.post('/chat', { agent_id: agentId, text: `message ${i}` }, { accept: 'application/json' });
    assert.equal(res.statusCode, 200, res.body);
  }
  const refused = await web.post('/chat', { agent_id: agentId, text: 'one too many' }, { accept: 'application/json' });
  assert.equal(refused.statusCode, 429, refused.body);
  const retryAfter = Number(refused.headers['retry-after']);
  assert.ok(retryAfter >= 1 && retryAfter <= 60, `Retry-After: ${refused.headers['retry-after']}`);
  const body = refused.json();
  assert.equal(body.error, 'rate_limited');
  assert.equal(body.message, `You have sent ${LIMIT} messages in the last minute, the most allowed. Try again in ${retryAfter} second${retryAfter === 1 ? '' : 's'}.`);

  // Without JS: the chat page again, saying why, with the text kept for the next try.
  const page = await web.post('/chat', { agent_id: agentId, text: 'still too many' });
  assert.equal(page.statusCode, 429);
  assert.match(page.body, /You have sent 3 messages in the last minute, the most allowed\./);
  assert.match(page.body, />still too many<\/textarea>/);

  assert.deepEqual((await turnsOf(await userIdOf(email))).sort(), ['message 0', 'message 1', 'message 2'], 'the refused ones were not taken');
});

test('the allowance is per person: another account, and the same account\'s API key, are not affected', async () => {
  const first = await signedUpWithAgent(t);
  await first.web.get('/chat');
  for (let i = 0; i <= LIMIT; i++) await first.web.post('/chat', { agent_id: first.agentId, text: `spent ${i}` }, { accept: 'application/json' });
  assert.equal((await first.web.post('/chat', { agent_id: first.agentId, text: 'no' }, { accept: 'application/json' })).statusCode, 429);

  const second = await signedUpWithAgent(t);
  await second.web.get('/chat');
  assert.equal((await second.web.post('/chat', { agent_id: second.agentId, text: 'mine' }, { accept: 'application/json' })).statusCode, 200);

  const apiUser = await t.userWithAgent({ rateLimit: 100 });
  const sent = await t.inject({ method: 'POST', url: '/api/v1/api-channel/messages', headers: { ...apiUser.auth, 'content-type': 'application/json' },
    payload: { text: 'through the API', agent_id: apiUser.agentId } });
  assert.equal(sent.statusCode, 200, sent.body);
});

test('when the limit cannot be counted (Redis down) the message is refused, not let through uncounted: 503 with Retry-After', async () => {
  await withTestApp(async (down) => {
    const { web, email, agentId } = await signedUpWithAgent(down);
    await web.get('/chat');
    const res = await web.post('/chat', { agent_id: agentId, text: 'not now' }, { accept: 'application/json' });
    assert.equal(res.statusCode, 503, res.body);
    assert.equal(res.headers['retry-after'], '1');
    assert.deepEqual(res.json(), { error: 'service_unavailable', message: 'Messages cannot be sent just now. Try again in a moment.' });
    const userId = (await down.runtime.store.db.selectFrom('users').select('id').where('email', '=', email).executeTakeFirstOrThrow()).id;
    assert.deepEqual(await down.runtime.store.db.selectFrom('sessions').select('id').where('user_id', '=', userId).execute(), []);
  }, { rateLimitStore: 'redis', redisUrl: 'redis://127.0.0.1:1' });
});
