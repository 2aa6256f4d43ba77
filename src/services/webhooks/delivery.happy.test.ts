import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { FEED_EVENT_TYPES } from '../../domain/feed-events.ts';
import { send } from '../../testing/conversation.ts';
import { allEvents, cancelSession, sessionStatus } from '../../testing/feed.ts';
import { startTestApp, type TestApp, type TestUser } from '../../testing/harness.ts';
import { answerOne, askQuestion, decideOne, draftAction, settledTranscript, unique } from '../../testing/missions.ts';
import { WebhookReceiver } from '../../testing/webhook-receiver.ts';

/**
 * Webhooks (contract §9.5) delivered over real HTTP to receivers on loopback that verify every
 * request with the `standardwebhooks` package, as an integrator's would.
 */
let t: TestApp;
const receivers: WebhookReceiver[] = [];
before(async () => {
  t = await startTestApp({ webhookAllowPrivateUrls: true, webhookRetryScheduleMs: [30, 30, 30, 30], duplicateWindowMs: 0 });
});
after(async () => {
  await t.close();
  for (const receiver of receivers) await receiver.close();
});

async function endpointFor(u: TestUser, events?: string): Promise<{ receiver: WebhookReceiver; id: string }> {
  const receiver = await WebhookReceiver.start();
  receivers.push(receiver);
  const { endpoint, secret } = await t.runtime.services.webhooks.create(u.id, { url: receiver.url, events });
  assert.match(endpoint.id, /^whk_[A-Za-z0-9]+$/);
  assert.match(secret, /^whsec_[A-Za-z0-9+/]+=*$/);
  receiver.secret = secret;
  return { receiver, id: endpoint.id };
}

test('every event type arrives, verified by standardwebhooks, with the §9.3 body and webhook-id the event id', async () => {
  const u = await t.userWithAgent();
  const { receiver } = await endpointFor(u);
  // turn.completed, action.pending, action.settled (approved), question.opened, question.answered
  const action = await draftAction(t, u, 'email', unique('Send it'));
  assert.equal((await decideOne(t, u, { operation_id: action.operationId, decision: 'approve' })).ok, true);
  await settledTranscript(t, u, action.sessionId, 2);
  const asked = await askQuestion(t, u, 'number', unique('How many?'));
  assert.equal((await answerOne(t, u, asked.requestId, '3')).accepted, true);
  await settledTranscript(t, u, asked.sessionId, 2);
  // turn.failed
  assert.equal((await send(t, u, { text: '!fail', session_id: asked.sessionId })).statusCode, 502);
  // turn.cancelled, action.settled (cancelled), question.closed
  const open = await draftAction(t, u, 'email', unique('Never sent'));
  await askQuestion(t, u, 'text', unique('Never answered?'), { target: open.sessionId });
  await send(t, u, { text: '!sleep 60000', session_id: open.sessionId }, { Prefer: 'wait=0' });
  await sessionStatus(t, u, open.sessionId, 'processing');
  assert.equal((await cancelSession(t, u, open.sessionId)).statusCode, 200);

  const feed = await allEvents(t, u);
  assert.deepEqual(new Set(feed.map((e) => e.type)), new Set(FEED_EVENT_TYPES), 'the feed holds every type');
  await receiver.until((got) => feed.every((event) => got.some((r) => r.webhookId === event.id)));
  for (const event of feed) {
    const got = receiver.received.filter((r) => r.webhookId === event.id);
    assert.equal(got.length, 1, `${event.id} once`);
    assert.equal(got[0]!.verified, true, `${event.type} verified`);
    assert.deepEqual(got[0]!.json, event, `${event.type}: the body is the event of GET /events`);
    assert.ok(Math.abs(Number(got[0]!.timestamp) - Date.now() / 1000) < 60, 'webhook-timestamp is now, in Unix seconds');
  }
  assert.equal(receiver.received.length, feed.length, 'nothing else arrived');
});

test('an endpoint gets only the types it subscribes to, and only its own account\'s events', async () => {
  const u = await t.userWithAgent();
  const other = await t.userWithAgent();
  const { receiver } = await endpointFor(u, 'turn.failed');
  const { receiver: everything } = await endpointFor(u);
  await send(t, u, { text: 'hello' });
  await send(t, other, { text: 'not yours' });
  const failed = await send(t, u, { text: '!fail' });
  assert.equal(failed.statusCode, 502);
  await everything.until((got) => got.length === 2);
  await receiver.until((got) => got.length === 1);
  assert.deepEqual(receiver.received.map((r) => r.json.type), ['turn.failed']);
  assert.deepEqual(everything.received.map((r) => r.json.type).sort(), ['turn.completed', 'turn.failed']);
  assert.ok(everything.received.every((r) => r.json.session_id !== undefined && r.json.data.text !== 'You said: not yours'));
});

test('a receiver answering 500 three times then 200 gets the event four times with one webhook-id, each signed anew', async () => {
  const u = await t.userWithAgent();
  const { receiver, id } = await endpointFor(u);
  receiver.answer = (n) => ({ status: n < 3 ? 500 : 200 });
  await send(t, u, { text: 'retry me' });
  await receiver.until((got) => got.length === 4);
  assert.equal(new Set(receiver.ids).size, 1, 'one webhook-id');
  assert.ok(receiver.received.every((r) => r.verified));
  const [delivery] = await t.runtime.services.webhooks.deliveries(u.id, id);
  await waitFor(async () => (await t.runtime.services.webhooks.deliveries(u.id, id))[0]!.state === 'delivered');
  const [done] = await t.runtime.services.webhooks.deliveries(u.id, id);
  assert.equal(done!.attempts, 4);
  assert.equal(done!.last_status, 200);
  assert.equal(delivery!.event_id, receiver.ids[0]);
  assert.equal((await t.runtime.services.webhooks.find(u.id, id))!.status, 'enabled');
  await new Promise((resolve) => setTimeout(resolve, 200));
  assert.equal(receiver.received.length, 4, 'no attempt after the delivery');
});

test('send again: the same event, the same webhook-id, a new delivery in the log', async () => {
  const u = await t.userWithAgent();
  const { receiver, id } = await endpointFor(u);
  await send(t, u, { text: 'once more' });
  await receiver.until((got) => got.length === 1);
  await waitFor(async () => (await t.runtime.services.webhooks.deliveries(u.id, id))[0]!.state === 'delivered');
  const [first] = await t.runtime.services.webhooks.deliveries(u.id, id);
  await t.runtime.services.webhooks.resend(u.id, id, first!.id);
  await receiver.until((got) => got.length === 2);
  assert.equal(receiver.received[1]!.webhookId, receiver.received[0]!.webhookId);
  assert.equal(receiver.received[1]!.body, receiver.received[0]!.body);
  assert.equal((await t.runtime.services.webhooks.deliveries(u.id, id)).length, 2);
});

async function waitFor(check: () => Promise<boolean>, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) assert.fail('never came true');
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
