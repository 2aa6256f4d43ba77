import assert from 'node:assert/strict';
import type { TelegramSettings } from '../channels/telegram/settings.ts';
import { FakeBotApi } from './fake-bot-api.ts';
import { startTestApp, type TestApp, type TestAppOptions } from './harness.ts';
import type { Config } from '../config.ts';

/** The Telegram channel's settings pointed at a fake Bot API (short lease and poll, so tests move quickly). */
export function telegramSettings(fake: FakeBotApi, overrides: Partial<TelegramSettings> = {}): TelegramSettings {
  return { botToken: fake.token, apiRoot: fake.apiRoot, webhookUrl: null, webhookSecret: null, leaseMs: 3_000, pollTimeoutSeconds: 2, ...overrides };
}

/** The same, as a server process's environment. */
export function telegramEnv(fake: FakeBotApi, extra: Record<string, string> = {}): Record<string, string> {
  return { TELEGRAM_BOT_TOKEN: fake.token, TELEGRAM_API_ROOT: fake.apiRoot, TELEGRAM_LEASE_MS: '3000', TELEGRAM_POLL_TIMEOUT_SECONDS: '2', ...extra };
}

/** A real app with the Telegram channel on, talking to `fake`. */
export function startTelegramApp(fake: FakeBotApi, overrides: Partial<Config> = {}, options: TestAppOptions = {}, telegram: Partial<TelegramSettings> = {}): Promise<TestApp> {
  return startTestApp({ telegram: telegramSettings(fake, telegram), ...overrides }, options);
}

let nextChat = 5_000_000;
/** A chat id no other test of the run uses. */
export const newChatId = (): number => nextChat++ + (process.pid % 1000) * 10_000;

/** Links `chatId` to `userId` the way a person does: a code from the service, then `/start <code>` in the chat. */
export async function linkChat(t: TestApp, fake: FakeBotApi, userId: string, chatId: number): Promise<void> {
  const { code } = await t.runtime.services.telegramLinks.createCode(userId);
  const before = fake.botMessages(chatId).length;
  fake.send(chatId, `/start ${code}`);
  const reply = await fake.nextBotMessage(chatId, before);
  assert.match(reply.text, /^Linked to your account/);
}

/** The person says `text` in `chatId`; resolves with the bot's next message that `match` accepts. */
export async function say(fake: FakeBotApi, chatId: number, text: string, match: (text: string) => boolean = () => true, timeoutMs?: number) {
  const before = fake.botMessages(chatId).length;
  const update = fake.send(chatId, text);
  const reply = await fake.nextBotMessage(chatId, before, (m) => match(m.text), timeoutMs);
  return { update, reply };
}
