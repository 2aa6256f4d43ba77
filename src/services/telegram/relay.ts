import * as repo from '../../store/repos/telegram.ts';
import type { ChatEvent, TelegramChat, TelegramMessage } from '../../store/repos/telegram.ts';
import { isoNowOf } from '../../store/shared-clock.ts';
import type { Store } from '../../store/store.ts';
import type { WakeupListener } from '../../engine/wakeups.ts';
import type { FeedService } from '../feed.ts';

export type { ChatEvent, TelegramChat, TelegramMessage };

const LEASE_NAME = 'telegram';
/** Handled updates are kept this long, so that a redelivery within it is still dropped. */
const UPDATE_KEPT_MS = 24 * 3600_000;

/**
 * The Telegram channel's state in the store: the inbox of updates, each chat's agent and
 * session, the events to deliver after each chat's cursor, the bot's messages that settle an
 * item, and the lease of the one instance that polls and delivers.
 */
export class TelegramRelay {
  private readonly store: Store;
  private readonly feed: FeedService;

  constructor(store: Store, feed: FeedService) {
    this.store = store;
    this.feed = feed;
  }

  /** Keeps the updates not received before; returns how many were new. */
  receive(updates: readonly { update_id: number }[]): Promise<number> {
    return repo.insertUpdates(this.store.db, updates, isoNowOf(this.store.clock));
  }

  async pendingUpdates(limit = 100): Promise<{ updateId: number; update: unknown }[]> {
    return (await repo.pendingUpdates(this.store.db, limit)).map((row) => ({ updateId: row.update_id, update: JSON.parse(row.payload) }));
  }

  async updateDone(updateId: number): Promise<void> {
    await repo.markUpdateDone(this.store.db, updateId);
  }

  /** Forgets handled updates past the time a redelivery could come (housekeeping); returns how many. */
  forgetOldUpdates(now: number): Promise<number> {
    return repo.deleteUpdatesBefore(this.store.db, new Date(now - UPDATE_KEPT_MS).toISOString());
  }

  chat(chatId: string): Promise<TelegramChat | null> {
    return repo.findChat(this.store.db, chatId);
  }

  setTarget(chatId: string, agentId: string | null, sessionId: string | null): Promise<void> {
    return repo.setChatTarget(this.store.db, chatId, agentId, sessionId);
  }

  recordMessage(message: TelegramMessage): Promise<void> {
    return repo.recordMessage(this.store.db, message);
  }

  message(chatId: string, messageId: number): Promise<TelegramMessage | null> {
    return repo.findMessage(this.store.db, chatId, messageId);
  }

  openMessagesOf(itemId: string): Promise<TelegramMessage[]> {
    return repo.openMessagesOf(this.store.db, itemId);
  }

  closeMessagesOf(itemId: string): Promise<void> {
    return repo.closeMessagesOf(this.store.db, itemId);
  }

  eventsToDeliver(limit = 100): Promise<ChatEvent[]> {
    return repo.eventsToDeliver(this.store.db, limit);
  }

  delivered(chatId: string, position: number): Promise<void> {
    return repo.advanceCursor(this.store.db, chatId, position);
  }

  /** Listens for everyone's events (any instance's) from now on: call before reading, as FeedService does. */
  listenForEvents(): WakeupListener {
    return this.feed.listenToEveryone();
  }

  /** Takes or renews the lease for `leaseMs`: true while this instance holds it. */
  claimLease(owner: string, leaseMs: number): Promise<boolean> {
    const now = Math.floor(this.store.clock.now()); // (the shared clock has fractions of a millisecond; the column is whole)
    return repo.claimLease(this.store.db, LEASE_NAME, owner, now, now + leaseMs);
  }

  releaseLease(owner: string): Promise<void> {
    return repo.releaseLease(this.store.db, LEASE_NAME, owner);
  }
}
