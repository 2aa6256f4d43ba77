import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { runCli } from '../../testing/cli.ts';
import { FakeBotApi } from '../../testing/fake-bot-api.ts';
import { seededDatabase } from '../../testing/harness.ts';
import { startServerProcess, type ServerProcess } from '../../testing/server-process.ts';
import { newChatId, telegramEnv } from '../../testing/telegram.ts';

/**
 * The real server process with the Telegram channel, killed with SIGKILL: a turn cut off
 * mid-run, and a reply written but held back by Telegram's flood control when the kill came,
 * both still arrive in the chat after the restart, once each (the inbox, the engine's jobs and
 * the chat's delivery cursor are in the database).
 */

const EMAIL = 'telegram-crash@example.test';
const seeded = seededDatabase(EMAIL, 1, { JOB_LEASE_MS: '1500', SHUTDOWN_GRACE_MS: '2000' });
let fake: FakeBotApi;
let server: ServerProcess | null = null;
before(async () => { fake = await new FakeBotApi().start(); });
after(async () => {
  await server?.kill();
  await fake.close();
});

const start = async () => { server = await startServerProcess({ ...seeded.env, ...telegramEnv(fake) }, 60_000); };

test('kill -9 mid-turn, and again with a reply not yet delivered: both replies arrive after the restart, once each', { timeout: 300_000 }, async () => {
  await start();
  const cli = await runCli({ ...seeded.env, SCRYPT_COST_LOG2: '10' }, 'telegram', 'link-code', '--email', EMAIL);
  assert.equal(cli.code, 0, cli.stderr);
  const chat = newChatId();
  fake.send(chat, `/start ${cli.stdout.trim()}`);
  await fake.nextBotMessage(chat, 0, (m) => m.text.startsWith('Linked'));

  // 1. A turn under way when the process dies.
  let seen = fake.botMessages(chat).length;
  const typingBefore = fake.callsOf('sendChatAction').length;
  fake.send(chat, '!sleep 4000 cut off mid-turn');
  await fake.waitFor(() => fake.callsOf('sendChatAction').length > typingBefore, 60_000, 'the turn to start');
  assert.deepEqual((await server!.kill('SIGKILL')).signal, 'SIGKILL');
  await start();
  const reply = await fake.nextBotMessage(chat, seen, (m) => m.text.startsWith('You said'), 60_000);
  assert.equal(reply.text, 'You said: cut off mid-turn');

  // 2. A reply written, its delivery held back (429) when the process dies.
  seen = fake.botMessages(chat).length;
  fake.failNext('sendMessage', 1, 30);
  const sentBefore = fake.callsOf('sendMessage').length;
  fake.send(chat, 'written before the kill');
  await fake.waitFor(() => fake.callsOf('sendMessage').length > sentBefore, 60_000, 'the refused delivery');
  await server!.kill('SIGKILL');
  await start();
  const late = await fake.nextBotMessage(chat, seen, () => true, 60_000);
  assert.equal(late.text, 'You said: written before the kill');

  // Once each, whatever was handled again after the restarts.
  await new Promise((resolve) => setTimeout(resolve, 1500));
  const texts = fake.botMessages(chat).map((m) => m.text);
  assert.equal(texts.filter((text) => text === 'You said: cut off mid-turn').length, 1);
  assert.equal(texts.filter((text) => text === 'You said: written before the kill').length, 1);
});
