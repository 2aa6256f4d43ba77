import { type FeedEvent, positionOf } from '../domain/feed-events.ts';
import { looksLikeId } from '../domain/ids.ts';
import { pageLimit } from '../domain/paging.ts';
import { Problem } from '../domain/problems.ts';
import { EVERYONE, type WakeupListener, type Wakeups } from '../engine/wakeups.ts';
import { cursorStanding, deleteEventsBefore, newestPosition, readEvents } from '../store/repos/events.ts';
import type { Store } from '../store/store.ts';

export interface FeedPage {
  events: FeedEvent[];
  has_more: boolean;
}

export interface FeedDeps {
  store: Store;
  wakeups: Wakeups;
  /** How long events are kept (EVENT_RETENTION_HOURS). */
  retentionMs: number;
}

/** Where a read holds on: how long at most, and the signal that ends it early (the client left, a shutdown). */
export interface Hold {
  waitMs: number;
  signal?: AbortSignal | undefined;
}

/**
 * The event feed (contract §9.3): each person's events in commit order, read in pages after a
 * cursor, held (long-poll, or a stream's next page) until an event exists.
 */
export class FeedService {
  private readonly deps: FeedDeps;

  constructor(deps: FeedDeps) {
    this.deps = deps;
  }

  /** A page after `after` (from the oldest kept without it), for `GET /events`; held up to `hold.waitMs` while empty. */
  async read(userId: string, options: { after?: string | undefined; limit?: number | undefined; sessionId?: string | undefined }, hold: Hold = { waitMs: 0 }): Promise<FeedPage> {
    const limit = pageLimit(options.limit);
    const sessionId = options.sessionId ?? null;
    if (sessionId !== null) await this.requireOwnSession(userId, sessionId);
    const position = options.after === undefined ? 0 : await this.positionOfCursor(userId, options.after, 'after');
    return this.pageAfter(userId, position, limit, sessionId, hold);
  }

  /**
   * Where a stream starts: after the Last-Event-ID it resumes from, else after `after`, else
   * after the newest event now (it sends what comes next).
   */
  async streamStart(userId: string, options: { lastEventId?: string | undefined; after?: string | undefined; sessionId?: string | undefined }): Promise<number> {
    const { lastEventId, after, sessionId } = options;
    if (sessionId !== undefined) await this.requireOwnSession(userId, sessionId);
    if (lastEventId !== undefined) return this.positionOfCursor(userId, lastEventId, 'Last-Event-ID');
    if (after !== undefined) return this.positionOfCursor(userId, after, 'after');
    return newestPosition(this.deps.store.db, userId);
  }

  /**
   * The events after `position`, at most `limit`; while there are none, held until one is
   * written (by any instance) or `hold` ends.
   */
  async pageAfter(userId: string, position: number, limit: number, sessionId: string | null, hold: Hold): Promise<FeedPage> {
    const { db } = this.deps.store;
    // Listening before the read: an event committed between the read and the wait still wakes it.
    const listener = hold.waitMs > 0 ? this.deps.wakeups.listen(`feed:${userId}`) : null;
    try {
      const deadline = Date.now() + hold.waitMs;
      for (;;) {
        const page = await readEvents(db, userId, position, limit, sessionId);
        if (page.events.length > 0 || !listener) return { events: page.events, has_more: page.hasMore };
        if (!(await listener.next(deadline - Date.now(), hold.signal))) return { events: [], has_more: false };
      }
    } finally {
      listener?.stop();
    }
  }

  /** Wakes at every person's next event, from now on (the Telegram channel delivers everyone's). */
  listenToEveryone(): WakeupListener {
    return this.deps.wakeups.listen(EVERYONE);
  }

  /** Deletes events past the retention; returns how many (housekeeping). */
  purgeExpired(now: number): Promise<number> {
    return deleteEventsBefore(this.deps.store.db, new Date(now - this.deps.retentionMs).toISOString());
  }

  private async positionOfCursor(userId: string, cursor: string, name: string): Promise<number> {
    const position = positionOf(cursor);
    const standing = position === null ? 'unknown' : await cursorStanding(this.deps.store.db, userId, position);
    if (standing === 'expired') {
      throw new Problem('cursor_expired', `${name} names an event older than the oldest kept: read the feed again without it (from the oldest kept).`);
    }
    if (standing === 'unknown') throw Problem.validation([{ path: name, message: 'must be the id of one of your events (evt_…)' }]);
    return position!;
  }

  private async requireOwnSession(userId: string, sessionId: string): Promise<void> {
    const found = looksLikeId('session', sessionId) && await this.deps.store.db.selectFrom('sessions').select('id')
      .where('id', '=', sessionId).where('user_id', '=', userId).executeTakeFirst();
    if (!found) throw new Problem('session_not_found', 'No such session.');
  }
}
