import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { runCli } from '../../testing/cli.ts';
import { FakeBotApi } from '../../testing/fake-bot-api.ts';
import { seededDatabase, TEST_DB } from '../../testing/harness.ts';
import { startServerProcess, type ServerProcess } from '../../testing/server-process.ts';
import { newChatId, telegramEnv } from '../../testing/telegram.ts';

/**
 * Two server processes on one PostgreSQL database: only the holder of the lease polls Telegram
 * (never two getUpdates at once, which Telegram refuses), and when it is killed the other takes
 * over, so the chat goes on. (SQLite serves one process a file: nothing to share.)
 */

const EMAIL = 'telegram-instances@example.test';
const seeded = TEST_DB === 'postgres' ? seededDatabase(EMAIL, 1) : null!;
let fake: FakeBotApi;
const servers: ServerProcess[] = [];
before(async () => { fake = await new FakeBotApi().start(); });
after(async () => {
  await Promise.all(servers.map((s) => s.kill()));
  await fake.close();
});

const LEADING = 'telegram: this instance now polls and delivers';
const leads = (server: ServerProcess) => server.output().includes(LEADING);

test('two instances: one poller; kill -9 it and the other takes over', { skip: TEST_DB !== 'postgres', timeout: 300_000 }, async () => {
  const start = async (id: string) => {
    const server = await startServerProcess({ ...seeded.env, ...telegramEnv(fake), INSTANCE_ID: id }, 60_000);
    servers.push(server);
    return server;
  };
  const first = await start('tg-a');
  await fake.waitFor(() => leads(first), 60_000, 'the first instance to lead');
  const second = await start('tg-b');

  const cli = await runCli({ ...seeded.env, SCRYPT_COST_LOG2: '10' }, 'telegram', 'link-code', '--email', EMAIL);
  const chat = newChatId();
  fake.send(chat, `/start ${cli.stdout.trim()}`);
  await fake.nextBotMessage(chat, 0, (m) => m.text.startsWith('Linked'));
  for (const text of ['one', 'two', 'three']) {
    const seen = fake.botMessages(chat).length;
    fake.send(chat, text);
    assert.equal((await fake.nextBotMessage(chat, seen)).text, `You said: ${text}`);
  }
  assert.equal(leads(second), false);

  // (Killed a moment after the last delivery, not between a sendMessage and its cursor's
  // update: there, delivery is at least once, and that message would be sent again.)
  await new Promise((resolve) => setTimeout(resolve, 500));
  await first.kill('SIGKILL');
  const seen = fake.botMessages(chat).length;
  fake.send(chat, 'after the take-over');
  assert.equal((await fake.nextBotMessage(chat, seen, () => true, 60_000)).text, 'You said: after the take-over');
  // The log leaves in blocks at least every 100 ms: the line may come a moment after the reply.
  await fake.waitFor(() => leads(second), 5_000, 'the second instance to say it leads');
  assert.equal(fake.maxConcurrentPolls, 1);
});
