import { createHash } from 'node:crypto';
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { isValidTs } from '../../../domain/turn-clock.ts';
import { pollTranscript, send, transcript } from '../../../testing/conversation.ts';
import { API, startTestApp, type TestApp } from '../../../testing/harness.ts';
import { ConversationsService } from '../../../services/conversations/index.ts';

describe('POST /messages: statuses', () => {
  let t: TestApp;
  // A generous ceiling keeps 'completed' certain on a loaded machine; 202s are asked for with Prefer: wait=0.
  before(async () => { t = await startTestApp({ waitCeilingMs: 5000, duplicateWindowMs: 10_000 }); });
  after(async () => { await t.close(); });

  test('completed: 200 with the reply of the built-in agent', async () => {
    const u = await t.userWithAgent();
    const res = await send(t, u, { text: 'hello there' });
    assert.equal(res.statusCode, 200);
    const body = res.json();
    assert.equal(body.status, 'completed');
    assert.equal(body.reply, 'You said: hello there');
    assert.equal(body.agent_id, u.agentId);
    assert.match(body.session_id, /^ses_/);
    assert.ok(isValidTs(body.message_ts) && isValidTs(body.reply_ts));
    assert.ok(body.reply_ts > body.message_ts);
  });

  test('a continued session keeps its agent and its transcript grows', async () => {
    const u = await t.userWithAgent({ plan: 'pro' });
    const other = await t.runtime.services.agents.create(u.id, { agent_name: 'Other' });
    const first = (await send(t, u, { text: 'one', agent_id: u.agentId })).json();
    const second = await send(t, u, { text: 'two', session_id: first.session_id, agent_id: other.agent_id });
    assert.equal(second.statusCode, 200);
    assert.equal(second.json().agent_id, u.agentId, 'an agent_id that differs is ignored');
    const page = (await transcript(t, u, first.session_id)).json();
    assert.deepEqual(page.messages.map((m: any) => [m.role, m.text]), [
      ['user', 'one'], ['agent', 'You said: one'], ['user', 'two'], ['agent', 'You said: two'],
    ]);
  });

  test('processing: 202 with Location when the wait ends first; the reply lands later', async () => {
    const u = await t.userWithAgent();
    const res = await send(t, u, { text: '!sleep 800 done sleeping' }, { Prefer: 'wait=0' });
    assert.equal(res.statusCode, 202);
    const body = res.json();
    assert.equal(body.status, 'processing');
    assert.equal(body.reply, undefined);
    assert.equal(res.headers.location, `${API}/sessions/${body.session_id}/messages`);
    const polled = await pollTranscript(t, u, body.session_id, (b) => b.status === 'idle' && b.messages.length === 2);
    assert.equal(polled.messages[1].text, 'You said: done sleeping');
    const viaLocation = await t.inject({ method: 'GET', url: `${res.headers.location}?after=${encodeURIComponent(body.message_ts)}`, headers: u.auth });
    assert.deepEqual(viaLocation.json().messages.map((m: any) => m.text), ['You said: done sleeping']);
  });

  test('queued: 202 while the agent is busy with another session; FIFO afterwards', async () => {
    const u = await t.userWithAgent();
    const busy = await send(t, u, { text: '!sleep 700' }, { Prefer: 'wait=0' });
    assert.equal(busy.json().status, 'processing');
    const waiting = await send(t, u, { text: 'next in line' }, { Prefer: 'wait=0' });
    assert.equal(waiting.statusCode, 202);
    assert.equal(waiting.json().status, 'queued');
    assert.ok(waiting.headers.location);
    const status = (await transcript(t, u, waiting.json().session_id)).json().status;
    assert.equal(status, 'queued');
    const done = await pollTranscript(t, u, waiting.json().session_id, (b) => b.messages.length === 2);
    assert.equal(done.messages[1].text, 'You said: next in line');
  });

  test('a queued request still waits up to the ceiling and completes when its turn comes', async () => {
    const u = await t.userWithAgent();
    await send(t, u, { text: '!sleep 150' }, { Prefer: 'wait=0' });
    const res = await send(t, u, { text: 'after the nap' });
    assert.equal(res.statusCode, 200);
    assert.equal(res.json().reply, 'You said: after the nap');
  });

  test('Prefer: wait=N is applied (capped at the ceiling) and echoed', async () => {
    const u = await t.userWithAgent();
    const zero = await send(t, u, { text: '!sleep 300' }, { Prefer: 'wait=0' });
    assert.equal(zero.statusCode, 202);
    assert.equal(zero.headers['preference-applied'], 'wait=0');
    const capped = await send(t, u, { text: 'capped' }, { Prefer: 'respond-async, wait=3600' });
    assert.equal(capped.headers['preference-applied'], 'wait=5');
    const plain = await send(t, u, { text: 'no preference' });
    assert.equal(plain.headers['preference-applied'], undefined);
  });

  test('!sleep without text replies "Slept <ms> ms."', async () => {
    const u = await t.userWithAgent();
    const res = await send(t, u, { text: '!sleep 5' });
    assert.equal(res.json().reply, 'Slept 5 ms.');
  });

  test('the only agent is chosen when no agent_id is given; agent_id picks among several', async () => {
    const u = await t.userWithAgent({ plan: 'pro' });
    const second = await t.runtime.services.agents.create(u.id, { agent_name: 'Second' });
    const res = await send(t, u, { text: 'to the second', agent_id: second.agent_id });
    assert.equal(res.json().agent_id, second.agent_id);
  });
});

describe('POST /messages: duplicates and idempotency', () => {
  let t: TestApp;
  before(async () => { t = await startTestApp({ waitCeilingMs: 10_000, duplicateWindowMs: 10_000 }); });
  after(async () => { await t.close(); });

  test('the same text to the same target within the window is a duplicate: no new turn', async () => {
    const u = await t.userWithAgent();
    const first = (await send(t, u, { text: 'same words' })).json();
    const again = await send(t, u, { text: 'same words' });
    assert.equal(again.statusCode, 200);
    assert.equal(again.json().status, 'duplicate');
    assert.equal(again.json().session_id, first.session_id);
    assert.equal(again.json().reply, 'You said: same words');
    assert.equal(again.headers.location, undefined, 'the reply is here: nothing to poll');
    const page = (await transcript(t, u, first.session_id)).json();
    assert.equal(page.messages.length, 2);
    // A different target is not a duplicate: the same text in the existing session starts a turn.
    const inSession = await send(t, u, { text: 'same words', session_id: first.session_id });
    assert.equal(inSession.json().status, 'completed');
  });

  test('a duplicate of a message still running points at the transcript to poll (Location), as a 202 does', async () => {
    const u = await t.userWithAgent();
    const first = await send(t, u, { text: '!sleep 400 still going' }, { Prefer: 'wait=0' });
    assert.equal(first.statusCode, 202);
    const again = await send(t, u, { text: '!sleep 400 still going' });
    assert.equal(again.statusCode, 200, again.body);
    assert.equal(again.json().status, 'duplicate');
    assert.equal(again.json().reply, undefined);
    assert.equal(again.headers.location, first.headers.location);
    assert.equal(again.headers.location, `${API}/sessions/${first.json().session_id}/messages`);
    await pollTranscript(t, u, first.json().session_id, (b) => b.status === 'idle');
  });

  test('a duplicate of a message the agent failed on says so: the error turn as reply, and error', async () => {
    const u = await t.userWithAgent();
    const first = await send(t, u, { text: '!fail' });
    assert.equal(first.statusCode, 502);
    const again = await send(t, u, { text: '!fail' });
    assert.equal(again.statusCode, 200, again.body);
    const body = again.json();
    assert.equal(body.status, 'duplicate');
    assert.equal(body.session_id, first.json().session_id);
    assert.equal(body.error, 'agent_failed');
    const page = (await transcript(t, u, body.session_id)).json();
    assert.equal(page.messages.length, 2, 'no new turn');
    assert.deepEqual({ reply: body.reply, reply_ts: body.reply_ts }, { reply: page.messages[1].text, reply_ts: page.messages[1].ts });
    assert.equal(page.messages[1].error, 'agent_failed');
    // A duplicate of a message that succeeded carries no error field.
    await send(t, u, { text: 'fine words' });
    assert.equal((await send(t, u, { text: 'fine words' })).json().error, undefined);
  });

  test('identical requests arriving at the same instant start exactly one turn', async () => {
    const u = await t.userWithAgent();
    const results = await Promise.all(Array.from({ length: 8 }, () => send(t, u, { text: 'at once' })));
    const statuses = results.map((r) => r.json().status);
    assert.equal(statuses.filter((s) => s !== 'duplicate').length, 1, statuses.join(','));
    const sessions = new Set(results.map((r) => r.json().session_id));
    assert.equal(sessions.size, 1);
    const page = await pollTranscript(t, u, [...sessions][0]!, (b) => b.status === 'idle');
    assert.equal(page.messages.filter((m: any) => m.role === 'user').length, 1);
  });

  test('Idempotency-Key: a retry returns the first outcome and starts no turn', async () => {
    const u = await t.userWithAgent();
    const headers = { 'Idempotency-Key': 'order-42' };
    const first = await send(t, u, { text: 'pay the invoice' }, headers);
    assert.equal(first.json().status, 'completed');
    const retry = await send(t, u, { text: 'pay the invoice' }, headers);
    assert.equal(retry.statusCode, 200);
    assert.deepEqual(retry.json(), first.json());
    const page = (await transcript(t, u, first.json().session_id)).json();
    assert.equal(page.messages.length, 2);
  });

  test('Idempotency-Key alone decides: the duplicate window does not apply', async () => {
    const u = await t.userWithAgent();
    const a = await send(t, u, { text: 'twice on purpose' }, { 'Idempotency-Key': 'a' });
    const b = await send(t, u, { text: 'twice on purpose' }, { 'Idempotency-Key': 'b' });
    assert.equal(a.json().status, 'completed');
    assert.equal(b.json().status, 'completed');
    assert.notEqual(a.json().session_id, b.json().session_id);
  });

  test('Idempotency-Key retry of a running turn reports it as it stands now, then with the reply', async () => {
    const u = await t.userWithAgent();
    const headers = { 'Idempotency-Key': 'slow-1', Prefer: 'wait=0' };
    const first = await send(t, u, { text: '!sleep 400 slow' }, headers);
    assert.equal(first.statusCode, 202);
    const retry = await send(t, u, { text: '!sleep 400 slow' }, headers);
    assert.equal(retry.statusCode, 202);
    assert.equal(retry.json().session_id, first.json().session_id);
    assert.ok(['processing', 'queued'].includes(retry.json().status));
    await pollTranscript(t, u, first.json().session_id, (b) => b.status === 'idle');
    const later = await send(t, u, { text: '!sleep 400 slow' }, headers);
    assert.equal(later.statusCode, 200);
    assert.equal(later.json().reply, 'You said: slow');
  });

  test('a duplicate or an idempotent retry answers at once, within the wait, and says the wait applied (Preference-Applied)', async () => {
    // Contract §1: with Prefer: wait=N the response carries Preference-Applied; answering at once is within N.
    const u = await t.userWithAgent();
    const waitLong = { Prefer: 'wait=8' };
    const first = await send(t, u, { text: '!sleep 800 still going' }, { 'Idempotency-Key': 'pa-1', Prefer: 'wait=0' });
    assert.equal(first.statusCode, 202);
    const retry = await send(t, u, { text: '!sleep 800 still going' }, { ...waitLong, 'Idempotency-Key': 'pa-1' });
    assert.equal(retry.statusCode, 202, 'the turn still runs: the retry answered as things stand');
    assert.equal(retry.headers['preference-applied'], 'wait=8');
    const duplicate = await send(t, u, { text: '!sleep 800 still going' }, waitLong);
    assert.equal(duplicate.json().status, 'duplicate');
    assert.equal(duplicate.headers['preference-applied'], 'wait=8');
  });

  test('concurrent requests with one Idempotency-Key start one turn; the others get 409 or the outcome', async () => {
    const u = await t.userWithAgent();
    const headers = { 'Idempotency-Key': 'burst' };
    const results = await Promise.all(Array.from({ length: 8 }, () => send(t, u, { text: 'only once' }, headers)));
    // The first is accepted; a retry reports the first outcome as it stands now (202 while it
    // runs, 200 once done) or, while the first is not yet accepted, 409.
    for (const r of results) assert.ok([200, 202, 409].includes(r.statusCode), r.body);
    const ok = results.filter((r) => r.statusCode !== 409);
    assert.ok(ok.length >= 1);
    assert.equal(new Set(ok.map((r) => r.json().session_id)).size, 1);
    for (const r of results.filter((r) => r.statusCode === 409)) assert.equal(r.json().code, 'idempotency_key_in_use');
    const page = (await transcript(t, u, ok[0]!.json().session_id)).json();
    assert.equal(page.messages.filter((m: any) => m.role === 'user').length, 1);
  });
});

describe('POST /messages: Idempotency-Key and the duplicate window together', () => {
  let t: TestApp;
  before(async () => { t = await startTestApp({ waitCeilingMs: 10_000, duplicateWindowMs: 10_000 }); });
  after(async () => { await t.close(); });

  test('a plain resend of a keyed message within the window is a duplicate of it', async () => {
    const u = await t.userWithAgent();
    const keyed = await send(t, u, { text: 'keyed first' }, { 'Idempotency-Key': 'dup-1' });
    const plain = await send(t, u, { text: 'keyed first' });
    assert.equal(plain.json().status, 'duplicate');
    assert.equal(plain.json().session_id, keyed.json().session_id);
  });

  test('an Idempotency-Key whose first request died before acceptance is free again after 30 s', async () => {
    const u = await t.userWithAgent();
    // What a process that died between taking the key and accepting the message leaves behind.
    await leavePendingKey(t, u.id, 'orphan', 'x', new Date(Date.now() - 31_000));
    const res = await send(t, u, { text: 'try again' }, { 'Idempotency-Key': 'orphan' });
    assert.equal(res.statusCode, 200);
    assert.equal(res.json().status, 'completed');
  });

  test('a retry while the first request is still being accepted gets 409 idempotency_key_in_use', async () => {
    const u = await t.userWithAgent();
    // What a first request with this very body leaves while it is between taking the key and
    // accepting (fresh: not abandoned). The body hash is the service's: text, session, agent.
    const bodyHash = createHash('sha256').update(JSON.stringify(['wait for it', null, null])).digest('hex');
    await leavePendingKey(t, u.id, 'in-flight', bodyHash, new Date());
    const res = await send(t, u, { text: 'wait for it' }, { 'Idempotency-Key': 'in-flight' });
    assert.equal(res.statusCode, 409);
    assert.equal(res.json().code, 'idempotency_key_in_use');
    assert.equal(res.headers['retry-after'], '1');
  });

  test('an Idempotency-Key older than its time to live is forgotten by the next request that uses it', async () => {
    const u = await t.userWithAgent();
    const first = await send(t, u, { text: 'long ago' }, { 'Idempotency-Key': 'aged' });
    await t.runtime.store.db.updateTable('idempotency_keys').set({ created_at: new Date(Date.now() - 25 * 3_600_000).toISOString() })
      .where('user_id', '=', u.id).where('key', '=', 'aged').execute();
    // A different body would be 422 idempotency_key_reused within the TTL; past it, it is a new message.
    const again = await send(t, u, { text: 'something else' }, { 'Idempotency-Key': 'aged' });
    assert.equal(again.statusCode, 200);
    assert.equal(again.json().reply, 'You said: something else');
    assert.notEqual(again.json().session_id, first.json().session_id);
  });

  test('an idempotent retry of a message the agent failed on is 502 agent_failed again, with no new turn', async () => {
    const u = await t.userWithAgent();
    const headers = { 'Idempotency-Key': 'fails' };
    const first = await send(t, u, { text: '!fail' }, headers);
    assert.equal(first.statusCode, 502);
    const retry = await send(t, u, { text: '!fail' }, headers);
    assert.equal(retry.statusCode, 502);
    assert.equal(retry.json().code, 'agent_failed');
    assert.equal(retry.json().session_id, first.json().session_id);
    assert.equal(retry.json().message_ts, first.json().message_ts);
    const page = (await transcript(t, u, first.json().session_id)).json();
    assert.equal(page.messages.length, 2);
  });

  test('Prefer: wait with an absurd number of seconds is capped at the ceiling', async () => {
    const u = await t.userWithAgent();
    const res = await send(t, u, { text: 'capped hard' }, { Prefer: 'wait=99999999999999999999' });
    assert.equal(res.headers['preference-applied'], 'wait=10');
  });
});

describe('POST /messages: a wait ceiling under a second', () => {
  let t: TestApp;
  before(async () => { t = await startTestApp({ waitCeilingMs: 800 }); });
  after(async () => { await t.close(); });

  test('Prefer: wait=5 waits the whole (sub-second) ceiling, not less', async () => {
    const u = await t.userWithAgent();
    const res = await send(t, u, { text: '!sleep 300 short nap' }, { Prefer: 'wait=5' });
    assert.equal(res.statusCode, 200, 'a 300 ms turn completes within the 800 ms ceiling');
    assert.equal(res.json().reply, 'You said: short nap');
    assert.equal(res.headers['preference-applied'], 'wait=0', 'whole seconds, rounded down');
  });
});

describe('POST /messages: the duplicate window runs out', () => {
  let t: TestApp;
  before(async () => { t = await startTestApp({ waitCeilingMs: 5000, duplicateWindowMs: 300 }); });
  after(async () => { await t.close(); });

  test('the same text after the window is a new message, without waiting for housekeeping', async () => {
    const u = await t.userWithAgent();
    const first = await send(t, u, { text: 'again later' });
    assert.equal((await send(t, u, { text: 'again later' })).json().status, 'duplicate');
    await new Promise((resolve) => setTimeout(resolve, 400));
    const later = await send(t, u, { text: 'again later' });
    assert.equal(later.json().status, 'completed');
    assert.notEqual(later.json().session_id, first.json().session_id);
  });

  test('a resend is a duplicate up to the window\'s last millisecond, and a new message from its end on', async () => {
    const u = await t.userWithAgent();
    const { store, engine, services } = t.runtime;
    const windowMs = 10_000;
    // The service on the store's clock standing at instants the test chooses.
    const clock = { now: store.clock.now() };
    const conversations = new ConversationsService({
      store: { ...store, clock: { now: () => clock.now } }, engine, agents: services.agents,
      waitCeilingMs: 5000, duplicateWindowMs: windowMs, idempotencyTtlMs: 3_600_000,
    });
    const message = { userId: u.id, channel: 'api', text: 'on the edge', agentId: u.agentId };
    const t0 = clock.now;
    const first = await conversations.submit(message);
    clock.now = t0 + windowMs - 1;
    const resent = await conversations.submit(message);
    assert.deepEqual([resent.status, resent.session_id], ['duplicate', first.session_id]);
    clock.now = t0 + windowMs;
    const later = await conversations.submit(message);
    assert.equal(later.status, 'completed');
    assert.notEqual(later.session_id, first.session_id);
  });
});

/** The record a first request leaves while it is between taking its Idempotency-Key and accepting. */
async function leavePendingKey(t: TestApp, userId: string, key: string, bodyHash: string, since: Date): Promise<void> {
  await t.runtime.store.db.insertInto('idempotency_keys').values({
    user_id: userId, key, body_hash: bodyHash, state: 'pending', session_id: null, job_id: null, created_at: since.toISOString(),
  }).execute();
}
