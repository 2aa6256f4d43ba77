import { z } from 'zod';
import { type FeedEvent, FeedEventSchema, positionOf } from '../domain/feed-events.ts';
import { PAGE_LIMIT, pageLimit } from '../domain/paging.ts';
import { Problem } from '../domain/problems.ts';
import { EVERYONE, type Hold, type WakeupListener, type Wakeups } from '../engine/wakeups.ts';
import { cursorStanding, deleteEventsBefore, newestPosition, readEvents } from '../store/repos/events.ts';
import type { Store } from '../store/store.ts';
import { findOwnSession } from './conversations/transcripts.ts';

/** How long a stream waits for a wake-up before it reads its feed again (its heartbeat keeps the connection meanwhile). */
const FOLLOW_RECHECK_MS = 60_000;

export const FeedPageSchema = z.object({ events: z.array(FeedEventSchema), has_more: z.boolean() }).meta({ id: 'EventPage' });
export type FeedPage = z.infer<typeof FeedPageSchema>;

export interface FeedDeps {
  store: Store;
  wakeups: Wakeups;
  /** How long events are kept (EVENT_RETENTION_HOURS). */
  retentionMs: number;
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

  /**
   * A page after `after` (from the oldest kept without it), for `GET /events`; held up to
   * `hold.waitMs` while empty. Checked as a transcript read is: the page size and the cursor's
   * form (422), then the session (404), then whether the cursor is one of the caller's events.
   */
  async read(userId: string, options: { after?: string | undefined; limit?: number | undefined; sessionId?: string | undefined }, hold: Hold = { waitMs: 0 }): Promise<FeedPage> {
    const limit = pageLimit(options.limit);
    const after = options.after === undefined ? undefined : cursorPosition(options.after, 'after');
    const sessionId = options.sessionId ?? null;
    if (sessionId !== null) await this.requireOwnSession(userId, sessionId);
    const position = after === undefined ? 0 : await this.standingPosition(userId, after, 'after');
    return this.pageAfter(userId, position, limit, sessionId, hold);
  }

  /**
   * Where a stream starts: after the Last-Event-ID it resumes from, else after `after`, else
   * after the newest event now (it sends what comes next). Checked as read() checks, `limit`
   * included (a stream's pages are its own, but the same URL is refused for the same input).
   */
  async streamStart(
    userId: string, options: { lastEventId?: string | undefined; after?: string | undefined; limit?: number | undefined; sessionId?: string | undefined },
  ): Promise<number> {
    const { lastEventId, after, sessionId } = options;
    pageLimit(options.limit);
    const cursor = lastEventId !== undefined ? { position: cursorPosition(lastEventId, 'Last-Event-ID'), name: 'Last-Event-ID' }
      : after !== undefined ? { position: cursorPosition(after, 'after'), name: 'after' } : null;
    if (sessionId !== undefined) await this.requireOwnSession(userId, sessionId);
    if (cursor) return this.standingPosition(userId, cursor.position, cursor.name);
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

  /**
   * A stream's events from `position` on, a page at a time as they are written (by any
   * instance), until `signal` aborts or the caller stops asking. One listener for the whole
   * stream, from before its first read: an event committed while a page is read or sent still
   * wakes the next look.
   */
  async *follow(userId: string, position: number, options: { sessionId?: string | null | undefined; signal: AbortSignal }): AsyncGenerator<FeedEvent[]> {
    const { db } = this.deps.store;
    const listener = this.deps.wakeups.listen(`feed:${userId}`);
    try {
      while (!options.signal.aborted) {
        const page = await readEvents(db, userId, position, PAGE_LIMIT.max, options.sessionId ?? null);
        if (page.events.length > 0) {
          position = positionOf(page.events.at(-1)!.id)!;
          yield page.events;
        }
        // Looked at again after a while all the same, should a wake-up have been lost.
        if (!page.hasMore) await listener.next(FOLLOW_RECHECK_MS, options.signal);
      }
    } finally {
      listener.stop();
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

  /** `position` if it is one of the caller's events still kept: 410 when it is older than the oldest kept, else 422. */
  private async standingPosition(userId: string, position: number, name: string): Promise<number> {
    const standing = await cursorStanding(this.deps.store.db, userId, position);
    if (standing === 'expired') {
      throw new Problem('cursor_expired', `${name} names an event older than the oldest kept: read the feed again without it (from the oldest kept).`);
    }
    if (standing === 'unknown') throw notOneOfYours(name);
    return position;
  }

  private async requireOwnSession(userId: string, sessionId: string): Promise<void> {
    if (!(await findOwnSession(this.deps.store.db, userId, sessionId))) throw new Problem('session_not_found', 'No such session.');
  }
}

/** A cursor's place in the feed, or 422 for what cannot be an event id. */
function cursorPosition(cursor: string, name: string): number {
  const position = positionOf(cursor);
  if (position === null) throw notOneOfYours(name);
  return position;
}

const notOneOfYours = (name: string) => Problem.validation([{ path: name, message: 'must be the id of one of your events (evt_…)' }]);
