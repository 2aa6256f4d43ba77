import assert from 'node:assert/strict';
import { rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { openBrowser, removeTemporaryShots, SHOTS, skip } from '../../testing/browser.ts';
import { FakeBotApi, type FakeMessage } from '../../testing/fake-bot-api.ts';
import type { TestApp } from '../../testing/harness.ts';
import { linkChat, newChatId, say, startTelegramApp } from '../../testing/telegram.ts';
import { transcriptPage } from '../../testing/telegram-transcript.ts';

/**
 * A conversation in Telegram (a reply, an action approved with its button, a question answered
 * wrongly then rightly), as the fake Bot API recorded it, drawn as a Telegram client shows it and
 * rendered by chromium: docs/screenshots/telegram-conversation.png with UPDATE_SCREENSHOTS=1.
 */


let fake: FakeBotApi;
let t: TestApp;
before(async () => {
  if (skip) return;
  fake = await new FakeBotApi().start();
  t = await startTelegramApp(fake);
});
after(async () => {
  removeTemporaryShots();
  if (skip) return;
  await t.close();
  await fake.close();
});

test('a Telegram conversation, rendered: replies, an approved action and an answered question', { skip, timeout: 120_000 }, async () => {
  const owner = await t.userWithAgent({ agentName: 'Helper' });
  const chat = newChatId();
  await linkChat(t, fake, owner.id, chat);
  const shown = new Map<number, string[]>(); // the buttons each message had when it came
  const remember = (m: FakeMessage) => shown.set(m.message_id, (m.reply_markup?.inline_keyboard ?? []).flat().map((b: { text: string }) => b.text));

  await say(fake, chat, 'Hi! Can you send the weekly report to the team?');
  const permission = (await say(fake, chat, '!action email Send the weekly report to team@acme.example', (text) => text.startsWith('🔐'))).reply;
  remember(permission);
  let seen = fake.botMessages(chat).length;
  fake.press(chat, permission.message_id, permission.reply_markup.inline_keyboard[0][0].callback_data);
  await fake.nextBotMessage(chat, seen, (m) => m.text.startsWith('Done'));
  const question = (await say(fake, chat, '!ask number How many people should get it?', (text) => text.startsWith('❓'))).reply;
  seen = fake.botMessages(chat).length;
  fake.send(chat, 'the whole team', question.message_id);
  await fake.nextBotMessage(chat, seen, (m) => m.text.startsWith('Not accepted'));
  seen = fake.botMessages(chat).length;
  fake.send(chat, '12', question.message_id);
  await fake.nextBotMessage(chat, seen, (m) => m.text.startsWith('Noted'));

  const conversation = fake.messages.filter((m) => m.chat_id === chat).slice(2) // from after the linking
    .map((m) => ({ ...m, buttonsShown: shown.get(m.message_id) ?? [] }));
  const browser = await openBrowser('telegram', { viewport: { width: 420, height: 800 } });
  const htmlPath = join(SHOTS, 'telegram-conversation.html');
  writeFileSync(htmlPath, transcriptPage('Helper (agent-channel)', conversation));
  try {
    const page = await browser.context.newPage();
    await page.goto(`file://${htmlPath}`);
    const text = await page.locator('main').innerText();
    for (const expected of ['You said: Hi!', 'Permission needed: email', 'Approve all "email"', 'Done: Send the weekly report', 'How many people', 'Not accepted', 'Noted: 12']) {
      assert.ok(text.includes(expected), `the page shows "${expected}"`);
    }
    await page.screenshot({ path: join(SHOTS, 'telegram-conversation.png'), fullPage: true });
  } finally {
    await browser.close();
    if (process.env.UPDATE_SCREENSHOTS === '1') rmSync(htmlPath, { force: true });
  }
});
