import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, test } from 'node:test';
import { FakeBotApi } from '../../testing/fake-bot-api.ts';
import type { TestApp } from '../../testing/harness.ts';
import { linkChat, newChatId, say, startTelegramApp } from '../../testing/telegram.ts';

/**
 * Webhook mode (TELEGRAM_WEBHOOK_URL): Telegram POSTs each update with the secret-token header;
 * one without the right secret is refused and changes nothing. The app's port is known only
 * once it listens, so the webhook URL points at a forwarder that learns it then.
 */

let fake: FakeBotApi;
let t: TestApp;
let appUrl = '';
let forwarder: Server;
let webhookUrl = '';
const SECRET = 'the-webhook-secret-0123456789';

before(async () => {
  fake = await new FakeBotApi().start();
  forwarder = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const headers = Object.fromEntries(Object.entries(req.headers).filter(([name]) => name === 'content-type' || name.startsWith('x-telegram'))) as Record<string, string>;
    const answer = await fetch(`${appUrl}${req.url}`, { method: req.method, headers, body: Buffer.concat(chunks) }).catch(() => null);
    res.writeHead(answer?.status ?? 502).end(answer ? await answer.text() : '');
  });
  await new Promise<void>((resolve) => forwarder.listen(0, '127.0.0.1', resolve));
  webhookUrl = `http://127.0.0.1:${(forwarder.address() as AddressInfo).port}/telegram/webhook`;
  t = await startTelegramApp(fake, {}, {}, { webhookUrl, webhookSecret: SECRET });
  appUrl = await t.app.listen({ port: 0, host: '127.0.0.1' });
});
after(async () => {
  await t.close();
  await fake.close();
  forwarder.closeAllConnections();
  await new Promise((resolve) => forwarder.close(resolve));
});

const updateCount = async () => Number((await t.runtime.store.db.selectFrom('telegram_updates').select((eb) => eb.fn.countAll().as('n')).executeTakeFirstOrThrow()).n);

test('the webhook is registered with its secret, and a conversation runs through it', async () => {
  const registered = await fake.waitFor(() => fake.callsOf('setWebhook')[0]);
  assert.equal(registered.params.url, webhookUrl);
  assert.equal(registered.params.secret_token, SECRET);
  assert.equal(fake.callsOf('getUpdates').length, 0);
  const owner = await t.userWithAgent();
  const chat = newChatId();
  await linkChat(t, fake, owner.id, chat);
  assert.equal((await say(fake, chat, 'by webhook')).reply.text, 'You said: by webhook');
  assert.ok(fake.callsOf('webhook-delivery').every((c) => c.params.ok));
});

test('a webhook call with a wrong, or no, secret is refused 401 and nothing is kept or run', async () => {
  const owner = await t.userWithAgent();
  const chat = newChatId();
  await linkChat(t, fake, owner.id, chat);
  const before = await updateCount();
  const update = { update_id: 990001, message: { message_id: 1, date: 0, chat: { id: chat, type: 'private' }, text: 'forged' } };
  for (const headers of [{ 'x-telegram-bot-api-secret-token': 'wrong-secret-0123456789' }, { 'x-telegram-bot-api-secret-token': `${SECRET}x` }, {}]) {
    const res = await t.inject({ method: 'POST', url: '/telegram/webhook', headers, payload: update });
    assert.equal(res.statusCode, 401);
    assert.ok(!res.body.includes(SECRET));
  }
  assert.equal(await updateCount(), before);
  await new Promise((resolve) => setTimeout(resolve, 300));
  assert.ok(!fake.botMessages(chat).some((m) => m.text.includes('forged')));
});

test('the right secret is acknowledged at once; the same update twice is kept once', async () => {
  const update = { update_id: 990002, message: { message_id: 2, date: 0, chat: { id: newChatId(), type: 'private' }, text: 'hello' } };
  const before = await updateCount();
  for (let i = 0; i < 2; i++) {
    const res = await t.inject({ method: 'POST', url: '/telegram/webhook', headers: { 'x-telegram-bot-api-secret-token': SECRET }, payload: update });
    assert.equal(res.statusCode, 200);
  }
  assert.equal(await updateCount(), before + 1);
});
