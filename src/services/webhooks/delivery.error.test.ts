import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { send } from '../../testing/conversation.ts';
import { startTestApp, type TestApp, type TestUser } from '../../testing/harness.ts';
import { WebhookReceiver } from '../../testing/webhook-receiver.ts';

/** Endpoints that fail (contract §9.5): retried on the schedule, then disabled; never in another endpoint's way. */
let t: TestApp;
const receivers: WebhookReceiver[] = [];
const warnings: Array<{ fields: Record<string, unknown>; message: string }> = [];
before(async () => {
  t = await startTestApp({ webhookAllowPrivateUrls: true, webhookRetryScheduleMs: [20, 20], duplicateWindowMs: 0 }, {
    logWarning: (fields, message) => warnings.push({ fields, message }),
  });
});
after(async () => {
  await t.close();
  for (const receiver of receivers) await receiver.close();
});

async function endpointFor(u: TestUser): Promise<{ receiver: WebhookReceiver; id: string; secret: string }> {
  const receiver = await WebhookReceiver.start();
  receivers.push(receiver);
  const { endpoint, secret } = await t.runtime.services.webhooks.create(u.id, { url: receiver.url });
  receiver.secret = secret;
  return { receiver, id: endpoint.id, secret };
}

async function waitFor(check: () => Promise<boolean>, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) assert.fail('never came true');
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

test('a dead endpoint is tried once and once per pause of the schedule, then disabled with the reason; another endpoint gets every event meanwhile', async () => {
  const u = await t.userWithAgent();
  const dead = await endpointFor(u);
  dead.receiver.answer = () => ({ status: 503 });
  const healthy = await endpointFor(u);
  const sessionId = (await send(t, u, { text: 'one' })).json().session_id;
  await send(t, u, { text: 'two', session_id: sessionId });
  await send(t, u, { text: 'three', session_id: sessionId });
  await healthy.receiver.until((got) => got.length === 3);
  await waitFor(async () => (await t.runtime.services.webhooks.find(u.id, dead.id))!.status === 'disabled');
  const endpoint = (await t.runtime.services.webhooks.find(u.id, dead.id))!;
  assert.match(endpoint.disabled_reason!, /^Disabled after 3 failed attempts to deliver evt_\d+ \(the last: HTTP 503\)\.$/);
  const firstEvent = dead.receiver.ids[0]!;
  assert.equal(dead.receiver.ids.filter((id) => id === firstEvent).length, 3, 'the first attempt and one per pause');
  const countAtDisable = dead.receiver.received.length;
  // Disabled: no more attempts, and no deliveries for new events.
  await send(t, u, { text: 'four', session_id: sessionId });
  await healthy.receiver.until((got) => got.length === 4);
  await new Promise((resolve) => setTimeout(resolve, 300));
  assert.ok(dead.receiver.received.length <= countAtDisable + 2, 'attempts in flight at the disable may end, nothing new starts');
  assert.equal(dead.receiver.received.filter((r) => r.json.data.text === 'You said: four').length, 0);
  assert.equal((await t.runtime.services.webhooks.find(u.id, healthy.id))!.status, 'enabled');
  assert.ok(healthy.receiver.received.every((r) => r.verified));
});

test('a slow endpoint holds none of another\'s deliveries: the other gets its events while the slow one is still answering', async () => {
  const u = await t.userWithAgent();
  const slow = await endpointFor(u);
  slow.receiver.answer = () => ({ status: 200, delayMs: 3000 });
  const quick = await endpointFor(u);
  const sessionId = (await send(t, u, { text: 's0' })).json().session_id;
  for (let i = 1; i < 8; i++) await send(t, u, { text: `s${i}`, session_id: sessionId });
  await quick.receiver.until((got) => got.length === 8);
  const slowDeliveries = await t.runtime.services.webhooks.deliveries(u.id, slow.id);
  assert.equal(slowDeliveries.filter((d) => d.state === 'delivered').length, 0, 'the slow endpoint has not answered yet');
  assert.ok(slow.receiver.received.length <= 4, `at most 4 attempts at once to one endpoint (got ${slow.receiver.received.length})`);
  await slow.receiver.until((got) => got.length === 8);
});

test('a failed attempt is logged once, with the endpoint, webhook-id, attempt and status: never the secret, the URL or the body', async () => {
  const u = await t.userWithAgent();
  const failing = await endpointFor(u);
  failing.receiver.answer = (n) => ({ status: n === 0 ? 500 : 200 });
  const before = warnings.length;
  await send(t, u, { text: 'a secret body text' });
  await failing.receiver.until((got) => got.length === 2);
  const lines = warnings.slice(before).filter((w) => w.fields.endpoint_id === failing.id);
  assert.equal(lines.length, 1);
  assert.equal(lines[0]!.message, 'webhook delivery attempt failed');
  assert.deepEqual({ ...lines[0]!.fields, duration_ms: 0, retry_in_ms: 0 }, {
    endpoint_id: failing.id, webhook_id: failing.receiver.ids[0], event_type: 'turn.completed', attempt: 1, status: 500,
    error: 'HTTP 500', duration_ms: 0, retry_in_ms: 0,
  });
  const text = JSON.stringify(lines);
  assert.ok(!text.includes(failing.secret.slice(6)) && !text.includes('a secret body text') && !text.includes(failing.receiver.url));
});
