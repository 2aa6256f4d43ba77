import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { FakeBotApi, type FakeMessage } from '../../testing/fake-bot-api.ts';
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

const buttons = (message: FakeMessage): { text: string; callback_data: string }[] => message.reply_markup?.inline_keyboard?.flat() ?? [];
const buttonsNow = (chat: number, messageId: number) => buttons(fake.botMessages(chat).find((m) => m.message_id === messageId)!);

async function linkedOwner() {
  const owner = await t.userWithAgent();
  const chat = newChatId();
  await linkChat(t, fake, owner.id, chat);
  return { owner, chat };
}

/** `!action <kind> <summary>` from the chat: the permission message with its buttons. */
async function draftAction(chat: number, kind: string, summary: string): Promise<FakeMessage> {
  return (await say(fake, chat, `!action ${kind} ${summary}`, (text) => text.startsWith('🔐'))).reply;
}

test('an action arrives with Approve / Approve all "<kind>" / Reject; Approve runs it and removes the buttons', async () => {
  const { chat } = await linkedOwner();
  const permission = await draftAction(chat, 'email', 'Send the report');
  assert.equal(permission.text, '🔐 Permission needed: email\nSend the report');
  assert.deepEqual(buttons(permission).map((b) => b.text), ['Approve', 'Approve all "email"', 'Reject']);
  for (const b of buttons(permission)) assert.ok(Buffer.byteLength(b.callback_data) <= 64, b.callback_data);

  const before = fake.botMessages(chat).length;
  fake.press(chat, permission.message_id, buttons(permission)[0]!.callback_data);
  assert.equal((await fake.nextBotMessage(chat, before)).text, 'Done: Send the report');
  await fake.waitFor(() => buttonsNow(chat, permission.message_id).length === 0, undefined, 'the buttons removed');
  assert.ok(fake.callsOf('answerCallbackQuery').length > 0);
  assert.ok(fake.callsOf('editMessageReplyMarkup').some((c) => c.params.message_id === permission.message_id));
});

test('Reject asks for a reason by force-reply; the reason reaches the agent, which re-plans', async () => {
  const { chat } = await linkedOwner();
  const permission = await draftAction(chat, 'payment', 'Pay the invoice');
  const before = fake.botMessages(chat).length;
  fake.press(chat, permission.message_id, buttons(permission)[2]!.callback_data);
  const prompt = await fake.nextBotMessage(chat, before);
  assert.match(prompt.text, /Why reject it\?/);
  assert.equal(prompt.reply_markup.force_reply, true);
  const afterPrompt = fake.botMessages(chat).length;
  fake.send(chat, 'too expensive this month', prompt.message_id);
  assert.equal((await fake.nextBotMessage(chat, afterPrompt)).text, 'Re-planned: too expensive this month');
  await fake.waitFor(() => buttonsNow(chat, permission.message_id).length === 0, undefined, 'the buttons removed');
});

test('an action approved through the API loses its buttons in the chat', async () => {
  const { owner, chat } = await linkedOwner();
  const permission = await draftAction(chat, 'deploy', 'Ship it');
  const approve = buttons(permission)[0]!.callback_data;
  const operationId = /^a:(op_\w+)$/.exec(approve)![1]!;
  const res = await t.inject({ method: 'POST', url: `${API}/actions/decisions`, headers: owner.auth, payload: [{ operation_id: operationId, decision: 'approve' }] });
  assert.equal(res.json().results[0].ok, true);
  await fake.waitFor(() => buttonsNow(chat, permission.message_id).length === 0, undefined, 'the buttons removed');
  // Pressing the old button now is told, not acted on twice.
  const before = fake.botMessages(chat).length;
  fake.press(chat, permission.message_id, approve);
  assert.match((await fake.nextBotMessage(chat, before, (m) => m.text.includes('already'))).text, /already settled/);
});

test('a question of a typed answer asks by force-reply: a wrong answer is refused with the agent\'s reason, a right one accepted', async () => {
  const { chat } = await linkedOwner();
  const question = (await say(fake, chat, '!ask number How many seats?', (text) => text.startsWith('❓'))).reply;
  assert.match(question.text, /How many seats\?\nReply to this message with a number/);
  assert.equal(question.reply_markup.force_reply, true);
  let before = fake.botMessages(chat).length;
  fake.send(chat, 'a few', question.message_id);
  assert.match((await fake.nextBotMessage(chat, before)).text, /^Not accepted: .+/);
  before = fake.botMessages(chat).length;
  fake.send(chat, '12', question.message_id);
  assert.equal((await fake.nextBotMessage(chat, before)).text, 'Noted: 12');
});

test('yes/no and choice questions arrive with buttons; pressing one answers', async () => {
  const { chat } = await linkedOwner();
  const yesno = (await say(fake, chat, '!ask yesno Ready to go?', (text) => text.startsWith('❓'))).reply;
  assert.deepEqual(buttons(yesno).map((b) => b.text), ['yes', 'no']);
  let before = fake.botMessages(chat).length;
  fake.press(chat, yesno.message_id, buttons(yesno)[0]!.callback_data);
  assert.equal((await fake.nextBotMessage(chat, before)).text, 'Noted: yes');
  await fake.waitFor(() => buttonsNow(chat, yesno.message_id).length === 0, undefined, 'the buttons removed');

  const choice = (await say(fake, chat, '!ask choice:red|green|blue Which colour?', (text) => text.startsWith('❓'))).reply;
  assert.deepEqual(buttons(choice).map((b) => b.text), ['red', 'green', 'blue']);
  before = fake.botMessages(chat).length;
  fake.press(chat, choice.message_id, buttons(choice)[2]!.callback_data);
  assert.equal((await fake.nextBotMessage(chat, before)).text, 'Noted: blue');
});

test('the same update delivered twice starts one turn', async () => {
  const { owner, chat } = await linkedOwner();
  const { update } = await say(fake, chat, 'only once please');
  fake.redeliver(update);
  fake.redeliver(update);
  // A later message's reply shows the redeliveries were taken in and passed over.
  await say(fake, chat, 'the next one');
  const turns = await t.runtime.store.db.selectFrom('turns').innerJoin('sessions', 'sessions.id', 'turns.session_id')
    .select(['turns.role', 'turns.text']).where('sessions.user_id', '=', owner.id).orderBy('turns.id').execute();
  assert.deepEqual(turns.map((r) => `${r.role}: ${r.text}`), [
    'user: only once please', 'agent: You said: only once please', 'user: the next one', 'agent: You said: the next one',
  ]);
  assert.equal(fake.botMessages(chat).filter((m) => m.text === 'You said: only once please').length, 1);
});

test('a 429 from Telegram is waited out for its retry_after, and the reply still arrives', async () => {
  const { chat } = await linkedOwner();
  fake.failNext('sendMessage', 1, 1);
  const sentAt = Date.now();
  const { reply } = await say(fake, chat, 'through the flood control');
  assert.equal(reply.text, 'You said: through the flood control');
  const refused = fake.calls.findLast((c) => c.method === 'sendMessage' && c.at >= sentAt)!;
  assert.ok(refused);
  const attempts = fake.callsOf('sendMessage').filter((c) => c.params.chat_id === chat && c.params.text === reply.text);
  assert.equal(attempts.length, 2);
  assert.ok(attempts[1]!.at - attempts[0]!.at >= 1000, `retried after ${attempts[1]!.at - attempts[0]!.at} ms`);
});
