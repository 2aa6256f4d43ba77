import assert from 'node:assert/strict';
import { test } from 'node:test';
import { WaitTimeoutError, type FeedEvent } from '../src/index.ts';
import { listeningApp, recordingFetch } from './server.ts';

/** Every method of the client against the real server over HTTP (on the pass's database). */
const served = listeningApp({ waitCeilingMs: 1000 });

test('agents.list and agents.create', async () => {
  const { client, agentIds } = await served.account(1);
  const created = await client.agents.create('Research');
  assert.match(created.agent_id, /^agt_/);
  assert.equal(created.name, 'Research');
  const listed = await client.agents.list();
  assert.deepEqual(listed.map((a) => a.agent_id).sort(), [agentIds[0]!, created.agent_id].sort());
});

test('send answers with the send result; a turn within the ceiling is completed', async () => {
  const { client, agentIds } = await served.account(2);
  const first = await client.send('hello', { agentId: agentIds[1] });
  assert.equal(first.status, 'completed');
  assert.equal(first.reply, 'You said: hello');
  assert.equal(first.agent_id, agentIds[1]);
  const next = await client.send('!sleep 1500 later', { sessionId: first.session_id, waitSeconds: 0 });
  assert.equal(next.status, 'processing');
  assert.equal(next.reply, undefined);
});

test('sendAndWait returns the reply of a turn that outlasts the wait ceiling (202, then the long-poll)', async () => {
  const recorded = recordingFetch();
  const { client } = await served.account(1, { client: { fetch: recorded.fetch } });
  const reply = await client.sendAndWait('!sleep 2500 the slow one');
  assert.equal(reply.reply, 'You said: the slow one');
  assert.equal(reply.status, 'completed');
  assert.equal(recorded.calls[0], 'POST /api/v1/api-channel/messages 202');
  assert.ok(recorded.calls.some((call) => call.startsWith(`GET /api/v1/api-channel/sessions/${reply.session_id}/messages 200`)), recorded.calls.join('\n'));
  const turns = [];
  for await (const page of client.transcript(reply.session_id)) turns.push(...page.messages);
  assert.deepEqual(turns.map((m) => `${m.role}: ${m.text}`), ['user: !sleep 2500 the slow one', 'agent: You said: the slow one'], 'one turn, not two');
});

test('sendAndWait gives up at its timeout (naming the session) and at its AbortSignal', async () => {
  const { client } = await served.account(1);
  const timedOut = await client.sendAndWait('!sleep 4000 too slow', { timeoutMs: 1500 }).catch((error: unknown) => error);
  assert.ok(timedOut instanceof WaitTimeoutError, String(timedOut));
  assert.match(timedOut.sessionId ?? '', /^ses_/);
  const stop = new AbortController();
  setTimeout(() => stop.abort(new Error('the user left')), 300);
  await assert.rejects(client.sendAndWait('!sleep 4000 abandoned', { signal: stop.signal }), /the user left/);
});

test('transcript iterates page by page, and with follow yields each new turn as it is written', async () => {
  const { client } = await served.account(1);
  const first = await client.send('one');
  await client.send('two', { sessionId: first.session_id });
  await client.send('three', { sessionId: first.session_id });
  const pages = [];
  for await (const page of client.transcript(first.session_id, { limit: 4 })) pages.push(page.messages.map((m) => m.text));
  assert.deepEqual(pages, [['one', 'You said: one', 'two', 'You said: two'], ['three', 'You said: three']]);

  const stop = new AbortController();
  const followed: string[] = [];
  const reading = (async () => {
    for await (const page of client.transcript(first.session_id, { follow: true, signal: stop.signal })) {
      followed.push(...page.messages.map((m) => m.text));
      if (followed.includes('You said: four')) return;
    }
  })();
  setTimeout(() => { void client.send('four', { sessionId: first.session_id }); }, 300);
  await reading;
  assert.deepEqual(followed.slice(-2), ['four', 'You said: four']);
  assert.equal(followed.length, 8);
});

test('actions: list, approve, approveSameType, reject with a reason; the agent goes on', async () => {
  const { client } = await served.account(1);
  const drafted = await client.sendAndWait('!action email Send the report');
  assert.deepEqual(drafted.awaiting.map((a) => a.type), ['action']);
  const [action] = await client.actions.list({ sessionId: drafted.session_id });
  assert.equal(action?.summary, 'Send the report');
  const [approved] = await client.actions.approve(action!.operation_id, { strict: true });
  assert.deepEqual(approved, { operation_id: action!.operation_id, ok: true, outcome: 'approved', also_approved: [] });

  const a = await client.sendAndWait('!action sms First');
  const b = await client.sendAndWait('!action sms Second');
  const [same] = await client.actions.approveSameType(a.awaiting[0]!.type === 'action' ? a.awaiting[0]!.operation_id : '');
  assert.ok(same?.ok);
  assert.deepEqual(same.ok && same.also_approved, [(b.awaiting[0] as { operation_id: string }).operation_id]);

  const c = await client.sendAndWait('!action call Phone the bank');
  const [rejected] = await client.actions.reject((c.awaiting[0] as { operation_id: string }).operation_id, 'Email them instead');
  assert.ok(rejected?.ok && rejected.outcome === 'rejected');
  const texts: string[] = [];
  for await (const page of client.transcript(c.session_id, { follow: true })) {
    texts.push(...page.messages.map((m) => m.text));
    if (texts.includes('Re-planned: Email them instead')) break;
  }
  assert.deepEqual(await client.actions.list(), []);
});

test('questions: list and answer (an answer that does not fit is not accepted)', async () => {
  const { client } = await served.account(1);
  const asked = await client.sendAndWait('!ask number How many copies?');
  const [question] = await client.questions.list();
  assert.equal(question?.text, 'How many copies?');
  assert.equal(question?.session_id, asked.session_id);
  const refused = await client.questions.answer(question!.request_id, 'a few');
  assert.ok(refused.ok && !refused.accepted && /number/i.test(refused.reason ?? ''));
  const accepted = await client.questions.answer(question!.request_id, '12', { strict: true });
  assert.deepEqual(accepted, { request_id: question!.request_id, ok: true, accepted: true });
  assert.deepEqual(await client.questions.list(), []);
});

test('cancel stops a running turn; events yields the feed (SSE) from a given event on', async () => {
  const { client } = await served.account(1);
  const start = await client.eventsPage({ limit: 200 });
  assert.deepEqual(start.events, []);
  const running = await client.send('!sleep 60000 forever', { waitSeconds: 0 });
  assert.deepEqual(await client.cancel(running.session_id), { session_id: running.session_id, cancelled: 1 });
  await client.sendAndWait('hi', { sessionId: running.session_id });
  const stop = new AbortController();
  const seen: FeedEvent[] = [];
  const later = setTimeout(() => { void client.send('and more', { sessionId: running.session_id }); }, 500); // once the stream is open
  for await (const event of client.events({ signal: stop.signal, sessionId: running.session_id })) {
    seen.push(event);
    if (event.type === 'turn.completed' && event.data.text === 'You said: and more') break;
  }
  clearTimeout(later);
  assert.deepEqual(seen.map((e) => e.type), ['turn.completed'], 'a stream without after starts with the next new event');
  const feed = await client.eventsPage({ limit: 200 });
  assert.deepEqual(feed.events.map((e) => e.type), ['turn.cancelled', 'turn.completed', 'turn.completed']);
  const fromFirst: FeedEvent[] = [];
  for await (const event of client.events({ after: feed.events[0]!.id })) {
    fromFirst.push(event);
    if (fromFirst.length === 2) break;
  }
  assert.deepEqual(fromFirst, feed.events.slice(1));
});
