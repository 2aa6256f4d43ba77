import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { send } from '../testing/conversation.ts';
import { startTestApp, type TestApp } from '../testing/harness.ts';
import { sample, scrape } from '../testing/metrics.ts';
import { WebhookReceiver } from '../testing/webhook-receiver.ts';

/** /metrics for webhooks: attempts by outcome, their duration, and the backlog per endpoint. */
let t: TestApp;
let receiver: WebhookReceiver;
before(async () => {
  t = await startTestApp({ webhookAllowPrivateUrls: true, webhookRetryScheduleMs: [20] });
  receiver = await WebhookReceiver.start();
});
after(async () => {
  await t.close();
  await receiver.close();
});

test('webhook_deliveries_total by outcome, webhook_delivery_duration_seconds, and webhook_backlog per endpoint', async () => {
  const empty = await scrape(t);
  for (const outcome of ['delivered', 'retrying', 'gave_up']) assert.equal(sample(empty, 'webhook_deliveries_total', { outcome }), 0, outcome);
  const u = await t.userWithAgent();
  const { endpoint } = await t.runtime.services.webhooks.create(u.id, { url: receiver.url });
  await t.runtime.services.webhooks.setEnabled(u.id, endpoint.id, false);
  const held = await t.runtime.services.webhooks.create(u.id, { url: receiver.url });
  // A delivery waiting on a disabled endpoint is backlog; one retried then delivered counts once each way.
  receiver.answer = (n) => ({ status: n === 0 ? 500 : 200 });
  await send(t, u, { text: 'measured' });
  await receiver.until((got) => got.length === 2);
  await t.runtime.services.webhooks.setEnabled(u.id, held.endpoint.id, false);
  await t.runtime.services.webhooks.resend(u.id, held.endpoint.id, (await t.runtime.services.webhooks.deliveries(u.id, held.endpoint.id))[0]!.id);
  let metrics = await scrape(t);
  for (let i = 0; i < 100 && sample(metrics, 'webhook_deliveries_total', { outcome: 'delivered' }) < 1; i++) {
    await new Promise((resolve) => setTimeout(resolve, 20));
    metrics = await scrape(t);
  }
  assert.equal(sample(metrics, 'webhook_deliveries_total', { outcome: 'retrying' }), 1);
  assert.equal(sample(metrics, 'webhook_deliveries_total', { outcome: 'delivered' }), 1);
  assert.equal(sample(metrics, 'webhook_delivery_duration_seconds_count', { outcome: 'delivered' }), 1);
  assert.equal(sample(metrics, 'webhook_backlog', { endpoint: held.endpoint.id }), 1);
});
