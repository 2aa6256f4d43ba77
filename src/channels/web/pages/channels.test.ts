import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { FakeBotApi } from '../../../testing/fake-bot-api.ts';
import { startTestApp, type TestApp } from '../../../testing/harness.ts';
import { newChatId, say, startTelegramApp } from '../../../testing/telegram.ts';
import { signedUpWithAgent, WebClient } from '../../../testing/web-client.ts';

let fake: FakeBotApi;
let t: TestApp;
before(async () => {
  fake = await new FakeBotApi().start();
  t = await startTelegramApp(fake);
  // The bot's name comes from getMe, asked as the channel starts.
  await fake.waitFor(() => t.runtime.services.telegramLinks.botUsername);
});
after(async () => {
  await t.close();
  await fake.close();
});

test('Account → Channels → Telegram shows a one-time code and the bot\'s deep link; the code links the chat; Unlink ends it', async () => {
  const { web } = await signedUpWithAgent(t, 'Tele');
  const page = await web.get('/account/channels');
  assert.equal(page.statusCode, 200);
  assert.match(page.body, /No Telegram chat is linked/);
  const shown = await web.post('/account/channels/telegram/code');
  assert.equal(shown.statusCode, 200);
  assert.equal(shown.headers['cache-control'], 'no-store');
  const link = /href="(https:\/\/t\.me\/agent_channel_test_bot\?start=([0-9A-Za-z]{12}))"/.exec(shown.body);
  assert.ok(link, shown.body);
  const code = link[2]!;
  assert.match(shown.body, new RegExp(`/start ${code}`));

  const chat = newChatId();
  assert.match((await say(fake, chat, `/start ${code}`)).reply.text, /Send a message to talk to Tele/);
  assert.match((await web.get('/account/channels')).body, /data-telegram-linked/);

  const unlinked = await web.post('/account/channels/telegram/unlink');
  assert.equal(unlinked.statusCode, 303);
  assert.match((await web.get(unlinked.headers.location as string)).body, /Telegram unlinked/);
  assert.match((await say(fake, chat, 'hi')).reply.text, /not linked/);
});

test('unlinking without the form\'s CSRF token changes nothing', async () => {
  const { web } = await signedUpWithAgent(t, 'Csrf');
  const shown = await web.post('/account/channels/telegram/code');
  const code = /start=([0-9A-Za-z]{12})/.exec(shown.body)![1]!;
  const chat = newChatId();
  await say(fake, chat, `/start ${code}`);
  web.csrf = 'wrong';
  const refused = await web.post('/account/channels/telegram/unlink');
  assert.equal(refused.statusCode, 403);
  assert.equal((await say(fake, chat, 'still linked')).reply.text, 'You said: still linked');
});

test('with the channel off, the page says how the operator turns it on, and no code is made', async () => {
  const off = await startTestApp();
  try {
    const web = new WebClient(off);
    await web.signup();
    assert.match((await web.get('/account/channels')).body, /Telegram is not set up on this server/);
    assert.equal((await web.post('/account/channels/telegram/code')).statusCode, 303);
    const codes = await off.runtime.store.db.selectFrom('telegram_link_codes').selectAll().execute();
    assert.equal(codes.length, 0);
  } finally {
    await off.close();
  }
});
