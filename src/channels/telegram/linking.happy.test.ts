import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { runCli } from '../../testing/cli.ts';
import { FakeBotApi } from '../../testing/fake-bot-api.ts';
import { databaseEnv, type TestApp } from '../../testing/harness.ts';
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

const turnCount = async () => Number((await t.runtime.store.db.selectFrom('turns').select((eb) => eb.fn.countAll().as('n')).executeTakeFirstOrThrow()).n);

test('an unlinked chat gets a short explanation and nothing reaches an agent', async () => {
  await t.userWithAgent();
  const chat = newChatId();
  const turns = await turnCount();
  for (const text of ['hello', '/agents', '/new', '!action email Send it']) {
    const { reply } = await say(fake, chat, text);
    assert.match(reply.text, /not linked to an agent-channel account/);
  }
  assert.equal(await turnCount(), turns);
});

test('the CLI prints a code alone on a line; /start <code> links the chat; the code works once', async () => {
  const owner = await t.userWithAgent();
  const cli = await runCli({ ...databaseEnv(t.database), SCRYPT_COST_LOG2: '10' }, 'telegram', 'link-code', '--email', owner.email);
  assert.equal(cli.code, 0, cli.stderr);
  assert.match(cli.stdout, /^[0-9A-Za-z]{12}\n$/);
  const code = cli.stdout.trim();
  const chat = newChatId();
  assert.match((await say(fake, chat, `/start ${code}`)).reply.text, /^Linked to your account\. Send a message to talk to Test agent/);
  assert.equal((await say(fake, chat, 'linked now')).reply.text, 'You said: linked now');

  const other = newChatId();
  assert.match((await say(fake, other, `/start ${code}`)).reply.text, /not valid: it may have expired .* or been used/);
  assert.match((await say(fake, other, 'hello')).reply.text, /not linked/);
});

test('an expired code is refused', async () => {
  const owner = await t.userWithAgent();
  const { code } = await t.runtime.services.telegramLinks.createCode(owner.id);
  await t.runtime.store.db.updateTable('telegram_link_codes').set({ expires_at: new Date(Date.now() - 1000).toISOString() }).where('user_id', '=', owner.id).execute();
  const chat = newChatId();
  assert.match((await say(fake, chat, `/start ${code}`)).reply.text, /not valid/);
  assert.equal(await t.runtime.services.telegramRelay.chat(String(chat)), null);
});

test('codes are stored as hashes only, valid for 10 minutes', async () => {
  const owner = await t.userWithAgent();
  const { code, expiresAt } = await t.runtime.services.telegramLinks.createCode(owner.id);
  const rows = await t.runtime.store.db.selectFrom('telegram_link_codes').selectAll().where('user_id', '=', owner.id).execute();
  assert.equal(rows.length, 1);
  assert.notEqual(rows[0]!.code_hash, code);
  assert.ok(!JSON.stringify(rows).includes(code));
  const ttl = Date.parse(expiresAt) - Date.parse(rows[0]!.created_at);
  assert.equal(ttl, 10 * 60_000);
});

test('/unlink ends the link: the chat is unlinked again, and the web app\'s unlink does the same', async () => {
  const owner = await t.userWithAgent();
  const chat = newChatId();
  await linkChat(t, fake, owner.id, chat);
  assert.match((await say(fake, chat, '/unlink')).reply.text, /^Unlinked/);
  assert.match((await say(fake, chat, 'still there?')).reply.text, /not linked/);

  await linkChat(t, fake, owner.id, chat);
  assert.equal(await t.runtime.services.telegramLinks.unlinkAll(owner.id), 1);
  assert.match((await say(fake, chat, 'and now?')).reply.text, /not linked/);
});

test('linking a second chat moves the account\'s link there (one chat an account)', async () => {
  const owner = await t.userWithAgent();
  const first = newChatId();
  const second = newChatId();
  await linkChat(t, fake, owner.id, first);
  await linkChat(t, fake, owner.id, second);
  assert.match((await say(fake, first, 'first?')).reply.text, /not linked/);
  assert.equal((await say(fake, second, 'second!')).reply.text, 'You said: second!');
});
