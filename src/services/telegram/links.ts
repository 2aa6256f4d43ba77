import { hash } from 'node:crypto';
import { randomBase62 } from '../../domain/ids.ts';
import { newestPosition } from '../../store/repos/events.ts';
import { chatsOfUser, deleteLinkCodesBefore, insertLinkCode, linkChat, unlinkChats, useLinkCode } from '../../store/repos/telegram.ts';
import { isoNowOf } from '../../store/shared-clock.ts';
import type { Store } from '../../store/store.ts';

/** How long a link code may be used. */
export const LINK_CODE_TTL_MS = 10 * 60_000;
/** Base62: fits a `/start` deep link's parameter, about 71 bits, and is typed by hand at a pinch. */
const CODE_LENGTH = 12;

const sha256 = (value: string): string => hash('sha256', value, 'hex');

export interface LinkCode {
  code: string;
  expiresAt: string;
}

/**
 * Linking Telegram chats to accounts: a one-time code (its hash stored, valid 10 minutes, used
 * once) that the person sends to the bot as `/start <code>`; unlinking from the chat or the web app.
 */
export class TelegramLinks {
  private readonly store: Store;
  /** The bot's @username once the channel has asked Telegram (getMe); null while unknown or off. */
  botUsername: string | null = null;

  constructor(store: Store) {
    this.store = store;
  }

  async createCode(userId: string): Promise<LinkCode> {
    const now = this.store.clock.now();
    const code = randomBase62(CODE_LENGTH);
    const expiresAt = new Date(now + LINK_CODE_TTL_MS).toISOString();
    await deleteLinkCodesBefore(this.store.db, new Date(now - LINK_CODE_TTL_MS).toISOString());
    await insertLinkCode(this.store.db, sha256(code), userId, new Date(now).toISOString(), expiresAt);
    return { code, expiresAt };
  }

  /** Links `chatId` with a code: the account's user id, or null for a code unknown, used or expired. */
  async redeem(chatId: string, code: string): Promise<string | null> {
    if (!/^[0-9A-Za-z]{1,64}$/.test(code)) return null;
    const userId = await useLinkCode(this.store.db, sha256(code), isoNowOf(this.store.clock));
    if (userId === null) return null;
    // Delivered from the account's newest event on: nothing from before the link reaches the chat.
    await linkChat(this.store.db, chatId, userId, await newestPosition(this.store.db, userId), isoNowOf(this.store.clock));
    return userId;
  }

  async unlinkChat(chatId: string): Promise<boolean> {
    return (await unlinkChats(this.store.db, { chatId })).length > 0;
  }

  /** Unlinks every chat of the account (the web app's button); returns how many. */
  async unlinkAll(userId: string): Promise<number> {
    return (await unlinkChats(this.store.db, { userId })).length;
  }

  /** The account's linked chats, for the web app. */
  async linkedChats(userId: string): Promise<{ chatId: string; linkedAt: string }[]> {
    return (await chatsOfUser(this.store.db, userId)).map((c) => ({ chatId: c.chat_id, linkedAt: c.linked_at }));
  }
}
