import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { send, transcript } from '../../../testing/conversation.ts';
import {
  allEvents, cancelSession, eventsOf, heldReads, readEvents, sessionStatus, timed, type FeedEventBody,
} from '../../../testing/feed.ts';
import { startTestApp, type TestApp, type TestUser } from '../../../testing/harness.ts';
import {
  answerOne, askQuestion, decideOne, draftAction, memberOfOwnersWorkspace, settledTranscript, unique,
} from '../../../testing/missions.ts';

/** §9.3 GET /events as JSON: each person's events, oldest first, paged with `after`, held with `Prefer: wait`. */
let t: TestApp;
before(async () => { t = await startTestApp({ waitCeilingMs: 10_000, duplicateWindowMs: 0 }); });
after(async () => { await t.close(); });

const RFC3339 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$/;

/** Every event has the shape of §9.3 and the feed is in order, oldest first. */
function assertFeedShape(events: FeedEventBody[], about: { agentId: string }): void {
  for (const event of events) {
    assert.deepEqual(Object.keys(event).sort(), ['agent_id', 'created_at', 'data', 'id', 'session_id', 'type'], JSON.stringify(event));
    assert.match(event.id, /^evt_[1-9][0-9]*$/);
    assert.match(event.created_at, RFC3339);
    assert.match(event.session_id, /^ses_/);
    assert.equal(event.agent_id, about.agentId);
  }
  const positions = events.map((event) => Number(event.id.slice(4)));
  assert.deepEqual([...positions].sort((a, b) => a - b), positions, 'oldest first');
  assert.equal(new Set(positions).size, positions.length, 'no event twice');
}

const agentTurns = async (u: Pick<TestUser, 'auth'>, sessionId: string) =>
  (await transcript(t, u, sessionId, 'limit=200')).json().messages.filter((m: { role: string }) => m.role === 'agent');

test('turn.completed and turn.failed: the agent\'s turns, with their text and ts (and the error)', async () => {
  const u = await t.userWithAgent();
  const ok = (await send(t, u, { text: 'hello feed' })).json();
  const failed = await send(t, u, { text: '!fail', session_id: ok.session_id });
  assert.equal(failed.statusCode, 502);
  const [, failure] = await agentTurns(u, ok.session_id);
  const events = await allEvents(t, u);
  assertFeedShape(events, u);
  assert.deepEqual(events.map((e) => [e.type, e.session_id, e.data]), [
    ['turn.completed', ok.session_id, { text: 'You said: hello feed', ts: ok.reply_ts }],
    ['turn.failed', ok.session_id, { text: failure.text, ts: failure.ts, error: 'agent_failed' }],
  ]);
});

test('action.pending, then action.settled approved or rejected, each followed by the agent\'s turn', async () => {
  const u = await t.userWithAgent();
  const approvedSummary = unique('Send the report');
  const approved = await draftAction(t, u, 'email', approvedSummary);
  const rejectedSummary = unique('Delete the archive');
  const rejected = await draftAction(t, u, 'email', rejectedSummary, approved.sessionId);
  assert.equal((await decideOne(t, u, { operation_id: approved.operationId, decision: 'approve' })).ok, true);
  await settledTranscript(t, u, approved.sessionId, 3);
  assert.equal((await decideOne(t, u, { operation_id: rejected.operationId, decision: 'reject', reason: 'keep it' })).ok, true);
  const turns = await settledTranscript(t, u, approved.sessionId, 4);
  const agentTexts = turns.filter((m) => m.role === 'agent');
  const events = await allEvents(t, u);
  assertFeedShape(events, u);
  assert.deepEqual(events.map((e) => [e.type, e.data]), [
    ['turn.completed', { text: agentTexts[0]!.text, ts: agentTexts[0]!.ts }],
    ['action.pending', { operation_id: approved.operationId, kind: 'email', summary: approvedSummary }],
    ['turn.completed', { text: agentTexts[1]!.text, ts: agentTexts[1]!.ts }],
    ['action.pending', { operation_id: rejected.operationId, kind: 'email', summary: rejectedSummary }],
    ['action.settled', { operation_id: approved.operationId, outcome: 'approved' }],
    ['turn.completed', { text: `Done: ${approvedSummary}`, ts: agentTexts[2]!.ts }],
    ['action.settled', { operation_id: rejected.operationId, outcome: 'rejected' }],
    ['turn.completed', { text: 'Re-planned: keep it', ts: agentTexts[3]!.ts }],
  ]);
});

test('question.opened with its text, answer_type and asked_of, then question.answered', async () => {
  const u = await t.userWithAgent();
  const text = unique('How many copies?');
  const asked = await askQuestion(t, u, 'number', text);
  assert.equal((await answerOne(t, u, asked.requestId, '3')).accepted, true);
  await settledTranscript(t, u, asked.sessionId, 2);
  const events = await allEvents(t, u);
  assertFeedShape(events, u);
  assert.deepEqual(events.map((e) => [e.type, e.type === 'turn.completed' ? e.data.text : e.data]), [
    ['turn.completed', asked.reply],
    ['question.opened', { request_id: asked.requestId, text, answer_type: 'number', asked_of: u.id }],
    ['question.answered', { request_id: asked.requestId }],
    ['turn.completed', 'Noted: 3'],
  ]);
});

test('a cancel: turn.cancelled with the cancelled message\'s ts (and no turn.failed), action.settled cancelled, question.closed', async () => {
  const u = await t.userWithAgent();
  const action = await draftAction(t, u, 'email', unique('Never sent'));
  const asked = await askQuestion(t, u, 'text', unique('Never answered?'), { target: action.sessionId });
  const running = (await send(t, u, { text: '!sleep 60000', session_id: action.sessionId }, { Prefer: 'wait=0' })).json();
  await sessionStatus(t, u, action.sessionId, 'processing');
  const before = (await allEvents(t, u)).length;
  assert.deepEqual((await cancelSession(t, u, action.sessionId)).json(), { session_id: action.sessionId, cancelled: 1 });
  const events = (await allEvents(t, u)).slice(before);
  assertFeedShape(events, u);
  assert.deepEqual(events.map((e) => [e.type, e.session_id, e.data]), [
    ['turn.cancelled', action.sessionId, { ts: running.message_ts }],
    ['action.settled', action.sessionId, { operation_id: action.operationId, outcome: 'cancelled' }],
    ['question.closed', action.sessionId, { request_id: asked.requestId }],
  ]);
});

test('after pages through the feed oldest first without skipping or repeating; limit sets the page size and has_more says whether more follow', async () => {
  const u = await t.userWithAgent();
  const sessionId = (await send(t, u, { text: 'p0' })).json().session_id;
  for (let i = 1; i < 5; i++) await send(t, u, { text: `p${i}`, session_id: sessionId });
  const all = await allEvents(t, u);
  assert.deepEqual(all.map((e) => e.data.text), ['You said: p0', 'You said: p1', 'You said: p2', 'You said: p3', 'You said: p4']);

  const pages: Array<{ ids: string[]; has_more: boolean }> = [];
  for (let after = ''; ;) {
    const res = await readEvents(t, u, `limit=2${after ? `&after=${after}` : ''}`);
    assert.equal(res.statusCode, 200);
    const page = res.json();
    pages.push({ ids: page.events.map((e: FeedEventBody) => e.id), has_more: page.has_more });
    if (!page.has_more) break;
    after = page.events.at(-1).id;
  }
  const ids = all.map((e) => e.id);
  assert.deepEqual(pages, [
    { ids: ids.slice(0, 2), has_more: true }, { ids: ids.slice(2, 4), has_more: true }, { ids: ids.slice(4), has_more: false },
  ]);
  assert.deepEqual((await readEvents(t, u, `after=${ids[4]}`)).json(), { events: [], has_more: false });
  assert.deepEqual((await readEvents(t, u, 'limit=1')).json().events.map((e: FeedEventBody) => e.id), [ids[0]]);
  assert.equal((await readEvents(t, u, 'limit=1')).json().has_more, true);
  assert.deepEqual((await readEvents(t, u, 'limit=200')).json(), { events: all, has_more: false });
  assert.deepEqual((await readEvents(t, u, `after=${ids[1]}&limit=200`)).json().events, all.slice(2));
});

test('the default page is 50 events; has_more until the last', async () => {
  const u = await t.userWithAgent();
  const sessionId = (await send(t, u, { text: 'd0' }, { Prefer: 'wait=0' })).json().session_id;
  for (let i = 1; i < 51; i++) await send(t, u, { text: `d${i}`, session_id: sessionId }, { Prefer: 'wait=0' });
  await settledTranscript(t, u, sessionId, 51);
  const first = (await readEvents(t, u)).json();
  assert.equal(first.events.length, 50);
  assert.equal(first.has_more, true);
  const rest = (await readEvents(t, u, `after=${first.events.at(-1).id}`)).json();
  assert.deepEqual(rest.events.map((e: FeedEventBody) => e.data.text), ['You said: d50']);
  assert.equal(rest.has_more, false);
});

test('session_id narrows the feed to one session', async () => {
  const u = await t.userWithAgent();
  const one = (await send(t, u, { text: 'in one' })).json();
  const two = (await send(t, u, { text: 'in two' })).json();
  await send(t, u, { text: 'one again', session_id: one.session_id });
  assert.deepEqual(await eventsOf(t, u, one.session_id), [
    ['turn.completed', { text: 'You said: in one', ts: one.reply_ts }],
    ['turn.completed', { text: 'You said: one again', ts: (await agentTurns(u, one.session_id))[1].ts }],
  ]);
  assert.deepEqual(await eventsOf(t, u, two.session_id), [['turn.completed', { text: 'You said: in two', ts: two.reply_ts }]]);
  // Paged within the session: after an event of the session, the session's next ones.
  const [first] = await allEvents(t, u, `session_id=${one.session_id}`);
  const rest = (await readEvents(t, u, `session_id=${one.session_id}&after=${first!.id}`)).json().events;
  assert.deepEqual(rest.map((e: FeedEventBody) => e.data.text), ['You said: one again']);
});

test('Prefer: wait with nothing after `after` holds the read until an event is written, then answers with it at once', async () => {
  const u = await t.userWithAgent();
  const first = (await send(t, u, { text: 'before the hold' })).json();
  const [last] = await allEvents(t, u);
  const holding = timed(readEvents(t, u, `after=${last!.id}`, { prefer: 'wait=10' }));
  await heldReads(t, 1);
  const second = (await send(t, u, { text: 'wakes the hold', session_id: first.session_id })).json();
  const { value: res, ms } = await holding;
  assert.equal(res.statusCode, 200);
  assert.equal(res.headers['preference-applied'], 'wait=10');
  assert.deepEqual(res.json().events.map((e: FeedEventBody) => [e.type, e.data]), [['turn.completed', { text: 'You said: wakes the hold', ts: second.reply_ts }]]);
  assert.ok(ms < 5_000, `answered when the event was written, not at the end of a 10 s wait (${Math.round(ms)} ms)`);
});

test('a held read with nothing new answers 200 with no events at the end of its wait; without Prefer it answers at once', async () => {
  const u = await t.userWithAgent();
  await send(t, u, { text: 'only one' });
  const [last] = await allEvents(t, u);
  const { value: held, ms } = await timed(readEvents(t, u, `after=${last!.id}`, { prefer: 'wait=1' }));
  assert.equal(held.statusCode, 200);
  assert.equal(held.headers['preference-applied'], 'wait=1');
  assert.ok(ms >= 990, `held for its whole 1 s wait (${Math.round(ms)} ms; a timer may fire a millisecond early)`);
  assert.deepEqual(held.json(), { events: [], has_more: false });
  const { value: plain, ms: plainMs } = await timed(readEvents(t, u, `after=${last!.id}`));
  assert.deepEqual(plain.json(), { events: [], has_more: false });
  assert.equal(plain.headers['preference-applied'], undefined);
  assert.ok(plainMs < 5_000, `answered at once (${Math.round(plainMs)} ms)`);
});

test('a question put to another member is in both feeds; the person asked sees only the question\'s events, not the owner\'s turns', async () => {
  const owner = await t.userWithAgent();
  const member = await memberOfOwnersWorkspace(t, owner);
  const text = unique('Can you sign the lease?');
  const asked = await askQuestion(t, owner, 'yesno', text, { of: member.email });
  assert.equal((await answerOne(t, member, asked.requestId, 'yes')).accepted, true);
  await settledTranscript(t, owner, asked.sessionId, 2);
  const closing = await askQuestion(t, owner, 'text', unique('And the keys?'), { of: member.email, target: asked.sessionId });
  await cancelSession(t, owner, asked.sessionId);

  const opened = { request_id: asked.requestId, text, answer_type: 'yesno', asked_of: member.id };
  const memberEvents = await allEvents(t, member);
  assertFeedShape(memberEvents, owner);
  assert.deepEqual(memberEvents.map((e) => [e.type, e.session_id, e.data.request_id]), [
    ['question.opened', asked.sessionId, asked.requestId],
    ['question.answered', asked.sessionId, asked.requestId],
    ['question.opened', asked.sessionId, closing.requestId],
    ['question.closed', asked.sessionId, closing.requestId],
  ]);
  assert.deepEqual(memberEvents[0]!.data, opened);
  const ownerEvents = await allEvents(t, owner);
  assert.deepEqual(ownerEvents.map((e) => e.type), [
    'turn.completed', 'question.opened', 'question.answered', 'turn.completed', 'turn.completed', 'question.opened', 'question.closed',
  ]);
  assert.deepEqual(ownerEvents[1]!.data, opened);
  // Each feed has ids of its own; the question's events carry the same data in both.
  assert.deepEqual(ownerEvents.filter((e) => e.type.startsWith('question.')).map((e) => e.data),
    memberEvents.map((e) => e.data));
});
