import type { Transaction } from 'kysely';
import type { NewFeedEvent } from '../domain/feed-events.ts';
import type { DB } from '../store/schema.ts';
import type { Bus, BusEvent } from './bus.ts';

/** Records the feed's events in the transaction (see store/repos/events.ts). */
/** Records a unit's feed events; returns how many webhook deliveries it wrote with them. */
export type FeedOutbox = (db: Transaction<DB>, events: readonly NewFeedEvent[]) => Promise<number>;

/**
 * What a unit of work sees inside its transaction. Whatever it does outside the database goes
 * through `publish` and the callbacks, which are settled with the transaction: delivered or run
 * once it has committed, dropped (or `onRollback` run) if it rolled back.
 */
export interface UnitOfWork {
  readonly db: Transaction<DB>;
  /**
   * A feed event (§9.3) is recorded in the transaction, for its recipients to read, and wakes
   * whoever waits on their feeds; a bus event only wakes (runners, waiting requests). Either is
   * told to every instance once the transaction has committed, the same event twice once.
   */
  publish(event: BusEvent | NewFeedEvent): Promise<void>;
  afterCommit(fn: () => void): void;
  onRollback(fn: () => void): void;
}

/**
 * The work of one transaction. It may run more than once (a grouped commit on SQLite replays
 * the units of a batch when one of them fails), so it acts on the world only through `tx`:
 * each run's events and callbacks are settled with that run, and only the last run's result
 * reaches the caller.
 */
export type RepeatableWork<T> = (tx: UnitOfWork) => Promise<T>;

/** One run of a unit of work: its events and callbacks, settled once with its transaction. */
export class UnitRun implements UnitOfWork {
  readonly db: Transaction<DB>;
  // Keyed by content: a unit that publishes the same event twice (a decision enqueuing one
  // agent's continuations, say) delivers it once; wake-ups say nothing more the second time.
  private readonly events = new Map<string, BusEvent>();
  private readonly feed: NewFeedEvent[] = [];
  private readonly commitFns: Array<() => void> = [];
  private readonly rollbackFns: Array<() => void> = [];
  private readonly bus: Bus;
  private readonly outbox: FeedOutbox;
  private readonly onError: (error: unknown) => void;
  private settled = false;

  /** `onError` hears of a callback that threw: the others still run, and every caller is still answered. */
  constructor(db: Transaction<DB>, bus: Bus, outbox: FeedOutbox, onError: (error: unknown) => void) {
    this.db = db;
    this.bus = bus;
    this.outbox = outbox;
    this.onError = onError;
  }

  async publish(event: BusEvent | NewFeedEvent): Promise<void> {
    if ('recipients' in event) {
      this.feed.push(event);
      return;
    }
    const key = JSON.stringify(event);
    if (this.events.has(key)) return;
    this.events.set(key, event);
    await this.bus.stage(this.db, event);
  }

  /**
   * The unit's last work in its transaction: its feed events written, and their recipients'
   * readers told at commit. Last, so that the outbox's locks (PostgreSQL) are held for the
   * commit alone.
   */
  async finish(): Promise<void> {
    if (this.feed.length === 0) return;
    const deliveries = await this.outbox(this.db, this.feed);
    await this.publish({
      type: 'feed', userIds: [...new Set(this.feed.flatMap((event) => event.recipients))].sort(), ...(deliveries > 0 ? { deliveries: true as const } : {}),
    });
  }

  afterCommit(fn: () => void): void {
    this.commitFns.push(fn);
  }

  onRollback(fn: () => void): void {
    this.rollbackFns.push(fn);
  }

  /**
   * Callbacks first: they may hand results to local waiters before bus events wake them bare.
   * A run settles once: committed or rolled back, whichever is called first.
   */
  committed(): void {
    if (this.settled) return;
    this.settled = true;
    for (const fn of this.commitFns) this.guarded(fn);
    for (const event of this.events.values()) this.guarded(() => this.bus.committed(event));
  }

  rolledBack(): void {
    if (this.settled) return;
    this.settled = true;
    for (const fn of this.rollbackFns) this.guarded(fn);
  }

  private guarded(fn: () => void): void {
    try {
      fn();
    } catch (error) {
      this.onError(error);
    }
  }
}
