import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { allEvents } from '../../testing/feed.ts';
import { freshDatabase, startTestApp, TEST_DB, type TestApp, type TestDatabase } from '../../testing/harness.ts';
import { send } from '../../testing/missions.ts';
import { WebhookReceiver } from '../../testing/webhook-receiver.ts';

/** Two instances over one PostgreSQL schema deliver each event once between them (contract §9.5). */
describe('several instances', { skip: TEST_DB !== 'postgres' && 'several instances need PostgreSQL (the PostgreSQL pass)' }, () => {
  let database: TestDatabase;
  let a: TestApp;
  let b: TestApp;
  let receiver: WebhookReceiver;
  const attempts = new Map<string, number>();
  before(async () => {
    database = await freshDatabase();
    const settings = { webhookAllowPrivateUrls: true, duplicateWindowMs: 0 };
    a = await startTestApp({ ...settings, instanceId: 'instance-a' }, { database });
    b = await startTestApp({ ...settings, instanceId: 'instance-b' }, { database });
    for (const [name, app] of [['a', a], ['b', b]] as const) {
      app.runtime.webhookDeliveries.observe({ attempted: () => attempts.set(name, (attempts.get(name) ?? 0) + 1) });
    }
    receiver = await WebhookReceiver.start();
  });
  after(async () => {
    await a?.close();
    await b?.close();
    await database?.drop();
    await receiver?.close();
  });

  test('events written through both instances reach the endpoint once each, claimed by both', async () => {
    const u = await a.userWithAgent();
    receiver.secret = (await a.runtime.services.webhooks.create(u.id, { url: receiver.url })).secret;
    // A short hold per answer, so that claims of both instances overlap.
    receiver.answer = () => ({ status: 200, delayMs: 20 });
    await Promise.all(Array.from({ length: 40 }, (_, i) => send(i % 2 === 0 ? a : b, u, `both-${i}`, { agentId: u.agentId })));
    const feed = await allEvents(a, u);
    assert.equal(feed.length, 40);
    await receiver.until((got) => feed.every((event) => got.some((r) => r.webhookId === event.id)));
    await new Promise((resolve) => setTimeout(resolve, 1500)); // (polls of both instances pass meanwhile)
    assert.equal(receiver.received.length, 40, 'no event twice');
    assert.deepEqual(new Set(receiver.ids), new Set(feed.map((event) => event.id)));
    assert.ok(receiver.received.every((r) => r.verified));
    assert.equal((attempts.get('a') ?? 0) + (attempts.get('b') ?? 0), 40);
    assert.ok((attempts.get('a') ?? 0) > 0 && (attempts.get('b') ?? 0) > 0, `both instances delivered: ${JSON.stringify([...attempts])}`);
  });
});
