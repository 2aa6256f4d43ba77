import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { FakeBotApi } from '../../testing/fake-bot-api.ts';
import { API, type TestApp } from '../../testing/harness.ts';
import { linkChat, newChatId, say, startTelegramApp } from '../../testing/telegram.ts';

let fake: FakeBotApi;
let t: TestApp;
before(async () => {
  fake = await new FakeBotApi().start();
  t = await startTelegramApp(fake);
});
after(async () => {
  await t.close();
  await fake.close();
});

test('a linked chat talks to the person\'s only agent through the pipeline; the session is theirs in the API, channel telegram', async () => {
  const owner = await t.userWithAgent();
  const chat = newChatId();
  await linkChat(t, fake, owner.id, chat);
  const { reply } = await say(fake, chat, 'hello from Telegram');
  assert.equal(reply.text, 'You said: hello from Telegram');
  const second = await say(fake, chat, 'and again');
  assert.equal(second.reply.text, 'You said: and again');

  const session = await t.runtime.store.db.selectFrom('sessions').select(['id', 'channel']).where('user_id', '=', owner.id).executeTakeFirstOrThrow();
  assert.equal(session.channel, 'telegram');
  const res = await t.inject({ method: 'GET', url: `${API}/sessions/${session.id}/messages`, headers: owner.auth });
  assert.deepEqual(res.json().messages.map((m: { role: string; text: string }) => `${m.role}: ${m.text}`), [
    'user: hello from Telegram', 'agent: You said: hello from Telegram', 'user: and again', 'agent: You said: and again',
  ]);
});

test('a slow turn shows "typing" until its reply arrives', async () => {
  const owner = await t.userWithAgent();
  const chat = newChatId();
  await linkChat(t, fake, owner.id, chat);
  const typingBefore = fake.callsOf('sendChatAction').filter((c) => c.params.chat_id === chat).length;
  const { reply } = await say(fake, chat, '!sleep 5000 slow one', undefined, 20_000);
  assert.equal(reply.text, 'You said: slow one');
  const typing = fake.callsOf('sendChatAction').filter((c) => c.params.chat_id === chat);
  assert.ok(typing.length - typingBefore >= 2, `typing shown ${typing.length - typingBefore} times over 5 s`);
  assert.ok(typing.every((c) => c.params.action === 'typing'));
});

test('a failed turn says so in the chat', async () => {
  const owner = await t.userWithAgent();
  const chat = newChatId();
  await linkChat(t, fake, owner.id, chat);
  const { reply } = await say(fake, chat, '!fail');
  assert.match(reply.text, /^⚠️ The agent could not process your message/);
});

test('a reply over 4,096 characters arrives in pieces Telegram takes, nothing lost', async () => {
  const owner = await t.userWithAgent();
  const chat = newChatId();
  await linkChat(t, fake, owner.id, chat);
  const long = Array.from({ length: 900 }, (_, i) => `word${i}`).join(' '); // ~6,000 characters
  const before = fake.botMessages(chat).length;
  fake.send(chat, long);
  await fake.waitFor(() => fake.botMessages(chat).length >= before + 2);
  const pieces = fake.botMessages(chat).slice(before).map((m) => m.text);
  assert.equal(pieces.length, 2);
  assert.ok(pieces.every((p) => p.length <= 4096));
  assert.equal(pieces.join(''), `You said: ${long}`);
});

test('/agents lists the agents with buttons; pressing one makes it the chat\'s agent; /new starts a new session', async () => {
  const owner = await t.userWithAgent({ plan: 'pro', agentName: 'First' });
  // Listed in the order they were made: a later millisecond, so that the order is not the ids'.
  await new Promise((resolve) => setTimeout(resolve, 5));
  const second = await t.runtime.services.agents.create(owner.id, { agent_name: 'Second' });
  const chat = newChatId();
  await linkChat(t, fake, owner.id, chat);
  const refused = await say(fake, chat, 'who answers?');
  assert.match(refused.reply.text, /Choose the agent/);
  const list = refused.reply;
  const buttons = list.reply_markup.inline_keyboard.flat();
  assert.deepEqual(buttons.map((b: { text: string }) => b.text), ['First', 'Second']);
  const secondButton = buttons.find((b: { text: string }) => b.text === 'Second');
  assert.ok(Buffer.byteLength(secondButton.callback_data) <= 64);
  const before = fake.botMessages(chat).length;
  fake.press(chat, list.message_id, secondButton.callback_data);
  assert.match((await fake.nextBotMessage(chat, before)).text, /Now talking to Second/);
  await say(fake, chat, 'to the second');
  const sessions = await t.runtime.store.db.selectFrom('sessions').select(['id', 'agent_id']).where('user_id', '=', owner.id).execute();
  assert.deepEqual(sessions.map((s) => s.agent_id), [second.agent_id]);

  assert.match((await say(fake, chat, '/new')).reply.text, /New conversation with Second/);
  await say(fake, chat, 'in a new session');
  const after = await t.runtime.store.db.selectFrom('sessions').select('id').where('user_id', '=', owner.id).execute();
  assert.equal(after.length, 2);
});

test('an API request keyed `telegram:<n>` takes nothing from the Telegram message n: both run; the person\'s conversations elsewhere are passed over, not sent', async () => {
  const owner = await t.userWithAgent();
  const chat = newChatId();
  await linkChat(t, fake, owner.id, chat);
  const { update } = await say(fake, chat, 'first');
  const next = update.update_id + 1; // the fake numbers updates one after another
  const api = await t.inject({
    method: 'POST', url: `${API}/messages`, headers: { ...owner.auth, 'idempotency-key': `telegram:${next}` }, payload: { text: 'from my own bridge' },
  });
  assert.equal(api.statusCode, 200);
  const { update: second, reply } = await say(fake, chat, 'from Telegram');
  assert.equal(second.update_id, next);
  assert.equal(reply.text, 'You said: from Telegram');

  // A conversation of the person's elsewhere is not sent to the chat, but its events are passed
  // over: the chat's cursor comes to the newest, instead of reading them again at every look.
  const sent = fake.botMessages(chat).length;
  assert.equal((await t.inject({ method: 'POST', url: `${API}/messages`, headers: owner.auth, payload: { text: 'not for Telegram' } })).statusCode, 200);
  const newest = async () => Number((await t.runtime.store.db.selectFrom('events').select((eb) => eb.fn.max('id').as('id')).where('recipient_user_id', '=', owner.id).executeTakeFirstOrThrow()).id);
  const cursor = async () => Number((await t.runtime.store.db.selectFrom('telegram_chats').select('event_cursor').where('user_id', '=', owner.id).executeTakeFirstOrThrow()).event_cursor);
  const target = await newest();
  for (let tries = 0; (await cursor()) < target; tries++) {
    assert.ok(tries < 100, 'the cursor passes over the events of sessions elsewhere');
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  assert.equal(fake.botMessages(chat).length, sent);
});
