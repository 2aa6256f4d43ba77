import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { pollTranscript, send, transcript } from '../../../testing/conversation.ts';
import { API, startTestApp, type TestApp } from '../../../testing/harness.ts';
import { preferredWaitSeconds } from '../prefer-wait.ts';

let t: TestApp;
before(async () => { t = await startTestApp({ waitCeilingMs: 10_000 }); });
after(async () => { await t.close(); });

async function turnCount(): Promise<number> {
  const row = await t.runtime.store.db.selectFrom('turns').select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow();
  return Number(row.n);
}

test('text rules: missing, non-string and blank are text_empty; over 32,000 characters is text_too_long', async () => {
  const u = await t.userWithAgent();
  const before = await turnCount();
  for (const body of [{}, { text: 5 }, { text: 42 }, { text: null }, { text: '   \n\t ' }, { text: '' }]) {
    const res = await send(t, u, body);
    assert.equal(res.statusCode, 422, JSON.stringify(body));
    assert.equal(res.json().code, 'text_empty');
    assert.match(String(res.headers['content-type']), /^application\/problem\+json/);
  }
  const long = await send(t, u, { text: 'x'.repeat(32_001) });
  assert.equal(long.json().code, 'text_too_long');
  const exactly = await send(t, u, { text: 'y'.repeat(32_000) });
  assert.equal(exactly.statusCode, 200);
  // Characters are code points: 32,000 emoji are 64,000 UTF-16 units and still allowed.
  const emoji = await send(t, u, { text: '😀'.repeat(32_000) });
  assert.equal(emoji.statusCode, 200);
  assert.equal(await turnCount(), before + 4, 'only the two valid messages added turns');
});

test('other invalid fields give validation_failed with errors[]; nothing is written', async () => {
  const u = await t.userWithAgent();
  const before = await turnCount();
  const res = await send(t, u, { text: 'hi', session_id: 12 });
  assert.equal(res.statusCode, 422);
  assert.equal(res.json().code, 'validation_failed');
  assert.deepEqual(res.json().errors.map((e: any) => e.path), ['session_id']);
  const key = await send(t, u, { text: 'hi' }, { 'Idempotency-Key': 'k'.repeat(256) });
  assert.equal(key.json().code, 'validation_failed');
  assert.equal(await turnCount(), before);
});

test('a validation_failed names what to send, in the client\'s terms, for the body and the headers alike', async () => {
  const u = await t.userWithAgent();
  const errorsOf = async (body: Record<string, unknown>, headers: Record<string, string> = {}) => (await send(t, u, body, headers)).json().errors;
  assert.deepEqual(await errorsOf({ text: 'hi', session_id: 12 }), [{ path: 'session_id', message: 'must be a string, not a number' }]);
  assert.deepEqual(await errorsOf({ text: 'hi', agent_id: null }), [{ path: 'agent_id', message: 'must be a string, not null' }]);
  assert.deepEqual(await errorsOf({ text: 'hi', session_id: '' }), [{ path: 'session_id', message: 'must not be empty' }]);
  assert.deepEqual(await errorsOf({ text: 'hi' }, { 'Idempotency-Key': 'k'.repeat(256) }), [{ path: 'idempotency-key', message: 'must be at most 255 characters' }]);
});

test('agent resolution: none → 404 agent_not_found; several → 422 agent_required; unknown → 404', async () => {
  const none = await t.user();
  const r1 = await send(t, none, { text: 'anyone?' });
  assert.equal(r1.statusCode, 404);
  assert.equal(r1.json().code, 'agent_not_found');
  const several = await t.userWithAgent({ plan: 'pro' });
  await t.runtime.services.agents.create(several.id, { agent_name: 'Another' });
  const r2 = await send(t, several, { text: 'which one?' });
  assert.equal(r2.statusCode, 422);
  assert.equal(r2.json().code, 'agent_required');
  // Both ways out are named: a client that misspelt session_id (sessionId) learns its name.
  assert.match(r2.json().detail, /\bagent_id\b.*\bsession_id\b/);
  const misspelt = await send(t, several, { text: 'go on', sessionId: 'ses_doesnotexist000000000' });
  assert.equal(misspelt.json().code, 'agent_required');
  assert.match(r1.json().detail, /POST \/agents/);
  const r3 = await send(t, several, { text: 'hi', agent_id: 'agt_doesnotexist000000000' });
  assert.equal(r3.json().code, 'agent_not_found');
  const r4 = await send(t, several, { text: 'hi', session_id: 'ses_doesnotexist000000000' });
  assert.equal(r4.statusCode, 404);
  assert.equal(r4.json().code, 'session_not_found');
});

test('Idempotency-Key sent twice → 422 validation_failed on idempotency-key, no turn (Node would join the two into one key neither named)', async () => {
  const u = await t.userWithAgent();
  const before = await turnCount();
  for (const keys of [['first', 'second'], ['same', 'same']]) {
    const res = await t.inject({
      method: 'POST', url: `${API}/messages`, payload: { text: `twice-keyed ${keys.join('/')}` },
      headers: { ...u.auth, 'content-type': 'application/json', 'idempotency-key': keys } as unknown as Record<string, string>,
    });
    assert.equal(res.statusCode, 422, res.body);
    assert.equal(res.json().code, 'validation_failed');
    assert.deepEqual(res.json().errors, [{ path: 'idempotency-key', message: 'must be sent once' }]);
  }
  assert.equal(await turnCount(), before);
  // The key "first, second" that Node would have made is still free.
  const joined = await send(t, u, { text: 'twice-keyed first/second' }, { 'Idempotency-Key': 'first, second' });
  assert.equal(joined.statusCode, 200, joined.body);
});

test('Idempotency-Key with a different body → 422 idempotency_key_reused, no turn', async () => {
  const u = await t.userWithAgent();
  await send(t, u, { text: 'first body' }, { 'Idempotency-Key': 'reuse-me' });
  const before = await turnCount();
  const res = await send(t, u, { text: 'second body' }, { 'Idempotency-Key': 'reuse-me' });
  assert.equal(res.statusCode, 422);
  assert.equal(res.json().code, 'idempotency_key_reused');
  assert.equal(await turnCount(), before);
});

test('a failed request frees its Idempotency-Key for a corrected retry', async () => {
  const u = await t.userWithAgent();
  const bad = await send(t, u, { text: 'hi', session_id: 'ses_nope00000000000000000' }, { 'Idempotency-Key': 'fix-and-retry' });
  assert.equal(bad.statusCode, 404);
  const again = await send(t, u, { text: 'hi', session_id: 'ses_nope00000000000000000' }, { 'Idempotency-Key': 'fix-and-retry' });
  assert.equal(again.statusCode, 404, 'not a 409: the first was never accepted');
});

test('!fail within the ceiling → 502 agent_failed carrying session_id and message_ts; the transcript shows an error turn', async () => {
  const u = await t.userWithAgent();
  const res = await send(t, u, { text: '!fail' });
  assert.equal(res.statusCode, 502);
  assert.equal(res.json().code, 'agent_failed');
  assert.match(res.json().session_id, /^ses_/);
  const page = await pollTranscript(t, u, res.json().session_id, (b) => b.messages.length === 2);
  assert.equal(page.messages[0].ts, res.json().message_ts, 'message_ts is the message\'s ts in the transcript');
  assert.equal(page.messages[1].role, 'agent');
  assert.equal(page.messages[1].error, 'agent_failed');
  // So the transcript can be read from the message on, as after a 202.
  const after = (await transcript(t, u, res.json().session_id, `after=${encodeURIComponent(res.json().message_ts)}`)).json();
  assert.deepEqual(after.messages.map((m: { error?: string }) => m.error), ['agent_failed']);
});

test('a 502 still says which wait was applied; a refused message (4xx) does not', async () => {
  const u = await t.userWithAgent();
  const failed = await send(t, u, { text: '!fail' }, { Prefer: 'wait=3' });
  assert.equal(failed.statusCode, 502);
  assert.equal(failed.headers['preference-applied'], 'wait=3');
  const refused = await send(t, u, { text: 'hi', session_id: 'ses_nope00000000000000000' }, { Prefer: 'wait=3' });
  assert.equal(refused.statusCode, 404);
  assert.equal(refused.headers['preference-applied'], undefined);
});

test('a long or unknown Prefer is ignored (RFC 7240), not refused', async () => {
  const u = await t.userWithAgent();
  const res = await send(t, u, { text: 'hello' }, { Prefer: `handling=lenient; ${'x'.repeat(1000)}` });
  assert.equal(res.statusCode, 200);
  assert.equal(res.headers['preference-applied'], undefined);
});

test('wait is read only as a preference of its own, never as a parameter of another (RFC 7240)', async () => {
  const u = await t.userWithAgent();
  // `handling=lenient; wait=0` prefers lenient handling, with a parameter named wait: the ceiling applies.
  const parameter = await send(t, u, { text: '!sleep 200 param' }, { Prefer: 'handling=lenient; wait=0' });
  assert.equal(parameter.statusCode, 200, parameter.body);
  assert.equal(parameter.headers['preference-applied'], undefined);
  const own = await send(t, u, { text: '!sleep 200 own' }, { Prefer: 'handling=lenient, wait=0' });
  assert.equal(own.statusCode, 202);
  assert.equal(own.headers['preference-applied'], 'wait=0');
  // Its reply lands 200 ms on: waited for here, or it is counted by the next test's turnCount().
  await pollTranscript(t, u, own.json().session_id, (body) => body.status === 'idle');
});

test('an id too long to be one is not found, like any unknown id (not a 422)', async () => {
  const u = await t.userWithAgent();
  const before = await turnCount();
  const session = await send(t, u, { text: 'hi', session_id: `ses_${'a'.repeat(100)}` });
  assert.equal(session.statusCode, 404, session.body);
  assert.equal(session.json().code, 'session_not_found');
  const agent = await send(t, u, { text: 'hi', agent_id: `agt_${'a'.repeat(5000)}` });
  assert.equal(agent.statusCode, 404, agent.body);
  assert.equal(agent.json().code, 'agent_not_found');
  // An empty one is still an invalid field.
  assert.equal((await send(t, u, { text: 'hi', session_id: '' })).json().code, 'validation_failed');
  assert.equal(await turnCount(), before);
});

test('Prefer is read as RFC 7240 writes it: quoted strings, parameters, and only the first wait', () => {
  const cases: Array<[string, number | undefined]> = [
    ['wait=5', 5], ['respond-async, wait=3600', 3600], ['WAIT = 2 ; x=y', 2], ['wait="5"', 5], ['x, wait=0', 0],
    ['handling=lenient; wait=1', undefined], // a parameter of another preference
    ['foo="x, wait=1"', undefined], ['foo="x\\", wait=1"', undefined], // inside a quoted string
    ['foo="a", wait=2', 2],
    ['wait=abc, wait=7', undefined], // the first wait decides, even an invalid one
    ['wait="5', undefined], ['wait', undefined], ['', undefined],
  ];
  for (const [header, seconds] of cases) assert.equal(preferredWaitSeconds(header), seconds, header);
  // A header of nothing but quotes and escapes names no wait.
  assert.equal(preferredWaitSeconds('"\\'.repeat(8000)), undefined);
});

test('a failure after the ceiling appears as an error turn for the poller', async () => {
  const u = await t.userWithAgent();
  const res = await send(t, u, { text: '!sleep 300 !fail' }, { Prefer: 'wait=0' });
  assert.equal(res.statusCode, 202);
  const page = await pollTranscript(t, u, res.json().session_id, (b) => b.status === 'idle' && b.messages.length === 2);
  assert.equal(page.messages[1].error, 'agent_failed');
});

test('body errors come after auth and rate limit, and before objects', async () => {
  const u = await t.userWithAgent();
  const noAuth = await t.inject({ method: 'POST', url: `${API}/messages`, payload: '{bad json', headers: { 'content-type': 'application/json' } });
  assert.equal(noAuth.statusCode, 401);
  const badJson = await t.inject({ method: 'POST', url: `${API}/messages`, payload: '{bad json', headers: { ...u.auth, 'content-type': 'application/json' } });
  assert.equal(badJson.statusCode, 400);
  assert.equal(badJson.json().code, 'malformed_json');
  const wrongType = await t.inject({ method: 'POST', url: `${API}/messages`, payload: 'text=hi', headers: { ...u.auth, 'content-type': 'application/x-www-form-urlencoded' } });
  assert.equal(wrongType.statusCode, 415);
  const emptyThenMissing = await send(t, u, { text: '', session_id: 'ses_nope00000000000000000' });
  assert.equal(emptyThenMissing.json().code, 'text_empty', '422 before 404');
});

test('a NUL character anywhere in the body is a 422 naming the field, on every database; nothing is written', async () => {
  const u = await t.userWithAgent();
  const before = await turnCount();
  const res = await send(t, u, { text: 'a\u0000b' });
  assert.equal(res.statusCode, 422);
  assert.equal(res.json().code, 'validation_failed');
  assert.deepEqual(res.json().errors.map((e: any) => e.path), ['text']);
  const agent = await t.inject({ method: 'POST', url: `${API}/agents`, headers: u.auth, payload: { agent_name: 'x\u0000' } });
  assert.equal(agent.statusCode, 422);
  assert.equal(await turnCount(), before);
});

test('a lone UTF-16 surrogate is a 422 naming the field too: stored, it would come back altered', async () => {
  const u = await t.userWithAgent();
  const before = await turnCount();
  for (const text of ['a\ud800b', 'ends high \ud83d', '\ude00 starts low']) {
    const res = await send(t, u, { text });
    assert.equal(res.statusCode, 422, JSON.stringify(text));
    assert.equal(res.json().code, 'validation_failed');
    assert.deepEqual(res.json().errors.map((e: any) => e.path), ['text']);
    assert.match(res.json().errors[0].message, /lone UTF-16 surrogate/);
  }
  assert.equal(await turnCount(), before);
  // A surrogate pair (an emoji) is ordinary text, and comes back as sent.
  assert.equal((await send(t, u, { text: 'pair 😀' })).json().reply, 'You said: pair 😀');
});
