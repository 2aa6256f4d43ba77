import type { ControlledTransaction, Transaction } from 'kysely';
import type { DB } from '../store/schema.ts';
import { runFixedStatement, sqliteTransactionOpen } from '../store/sqlite-transaction.ts';
import type { Store } from '../store/store.ts';
import type { Bus } from './bus.ts';
import { recordEvents } from '../store/repos/events.ts';
import { UnitRun, type FeedOutbox, type RepeatableWork } from './unit-of-work.ts';

type BatchOutcome = { ok: true; value: unknown } | { ok: false; error: unknown };
/** Batches run with a savepoint per unit after one had to be replayed (see runBatch). */
const SAVEPOINT_BATCHES_AFTER_REPLAY = 20;

/**
 * The engine's transactions: each unit of work publishes its events inside its transaction, and
 * they are delivered (and its callbacks run) once it has committed. On SQLite, units that arrive
 * while a commit is under way share the next transaction (group commit).
 */
export class Transactions {
  private readonly store: Store;
  private readonly bus: Bus;
  private readonly onError: (error: unknown, context: string) => void;
  private readonly batch: Array<{ work: RepeatableWork<unknown>; resolve(value: unknown): void; reject(error: unknown): void }> = [];
  private flushing = false;
  private savepointBatchesLeft = 0;
  private readonly outbox: FeedOutbox = (db, events) => recordEvents(db, this.store.dialect, events, new Date(this.store.clock.now()).toISOString());
  /** Grouped transactions (SQLite) run, and how many of them had to run again unit by unit. */
  readonly stats = { batches: 0, replays: 0 };

  constructor(store: Store, bus: Bus, onError: (error: unknown, context: string) => void) {
    this.store = store;
    this.bus = bus;
    this.onError = onError;
  }

  /**
   * Runs a unit of work in a transaction; its events are delivered after it commits.
   * On SQLite, transactions that arrive while one is committing are grouped into the next
   * one: one commit, and its file-system round trips, serve many requests. One failing never
   * affects another (see runBatch: when one fails, the others run again). Nobody is answered
   * before the commit.
   */
  async transact<T>(work: RepeatableWork<T>): Promise<T> {
    if (this.store.dialect !== 'sqlite') return this.transactAlone(work);
    return new Promise<T>((resolve, reject) => {
      this.batch.push({ work: work as RepeatableWork<unknown>, resolve: resolve as (value: unknown) => void, reject });
      this.flushBatches();
    });
  }

  private async transactAlone<T>(work: RepeatableWork<T>): Promise<T> {
    let unit: UnitRun | undefined;
    try {
      const result = await this.store.db.transaction().execute(async (trx) => {
        unit = this.newUnit(trx);
        const value = await work(unit);
        await unit.finish();
        return value;
      });
      unit!.committed();
      return result;
    } catch (error) {
      unit?.rolledBack();
      throw error;
    }
  }

  private flushBatches(): void {
    if (this.flushing) return;
    this.flushing = true;
    // Wait one turn of the event loop first: requests whose I/O is already in hand join this
    // batch instead of each paying for a commit of its own.
    void (async () => {
      await new Promise((resolve) => setImmediate(resolve));
      while (this.batch.length > 0) {
        const items = this.batch.splice(0, 100);
        try {
          await this.runBatch(items);
        } catch (error) {
          // Not expected (every path settles its units); still, no caller is left waiting.
          this.onError(error, 'running a batch');
          for (const item of items) item.reject(error);
        }
      }
    })().finally(() => {
      this.flushing = false;
      if (this.batch.length > 0) this.flushBatches();
    });
  }

  /**
   * One transaction for the batch. Units first run one after the other with no savepoint each
   * (a savepoint per unit, and the copies of pages it keeps, cost a good share of a turn's CPU on
   * a database grown by use). If one fails, the whole transaction rolls back, every unit that ran
   * is told so through its hooks, and the batch runs again with each unit in a savepoint of its
   * own, so the failure touches no other unit. After such a replay the next batches go straight
   * to savepoints for a while: a stream of failing units (duplicates, say) is not run twice each.
   */
  private async runBatch(items: typeof this.batch): Promise<void> {
    this.stats.batches++;
    if (items.length > 1 && this.savepointBatchesLeft > 0) {
      this.savepointBatchesLeft--;
      return this.runUnitsInSavepoints(items);
    }
    if (await this.runUnitsTogether(items)) return;
    this.stats.replays++;
    this.savepointBatchesLeft = SAVEPOINT_BATCHES_AFTER_REPLAY;
    await this.runUnitsInSavepoints(items);
  }

  /** False when a unit failed in a batch of several: all was rolled back, to be run again apart. */
  private async runUnitsTogether(items: typeof this.batch): Promise<boolean> {
    const trx = await this.beginBatch(items);
    if (!trx) return true;
    const units: UnitRun[] = [];
    const outcomes: BatchOutcome[] = [];
    for (const item of items) {
      const unit = this.newUnit(trx);
      units.push(unit);
      try {
        const value = await item.work(unit);
        await unit.finish();
        outcomes.push({ ok: true, value });
      } catch (error) {
        await trx.rollback().execute().catch(() => {});
        for (const ran of units) ran.rolledBack();
        if (items.length > 1) return false;
        item.reject(error); // alone, it fails as it would in a savepoint: nothing else to keep
        return true;
      }
    }
    await this.commitBatch(trx, items, units, outcomes);
    return true;
  }

  private async runUnitsInSavepoints(items: typeof this.batch): Promise<void> {
    const trx = await this.beginBatch(items);
    if (!trx) return;
    const units = items.map(() => this.newUnit(trx));
    const outcomes: BatchOutcome[] = [];
    for (const [i, item] of items.entries()) {
      const name = `unit${i}`;
      try {
        await runFixedStatement(trx, `savepoint ${name}`);
        try {
          const value = await item.work(units[i]!);
          await units[i]!.finish();
          await runFixedStatement(trx, `release ${name}`);
          outcomes.push({ ok: true, value });
        } catch (error) {
          if (!sqliteTransactionOpen(trx)) {
            // SQLite rolled the whole transaction back: the units before this one are undone
            // too. This one fails; the others run again in a new transaction (once Kysely has
            // let go of this one's connection).
            await trx.rollback().execute().catch(() => {});
            for (const ran of units.slice(0, i + 1)) ran.rolledBack();
            item.reject(error);
            await this.runUnitsInSavepoints([...items.slice(0, i), ...items.slice(i + 1)]);
            return;
          }
          await runFixedStatement(trx, `rollback to ${name}`);
          // Undone now, not at the commit: a slot it had reserved is free for the units after it.
          units[i]!.rolledBack();
          outcomes.push({ ok: false, error });
        }
      } catch (error) {
        outcomes.push({ ok: false, error });
      }
    }
    await this.commitBatch(trx, items, units, outcomes);
  }

  private newUnit(trx: Transaction<DB>): UnitRun {
    return new UnitRun(trx, this.bus, this.outbox, (error) => this.onError(error, 'transaction hook'));
  }

  /** The batch's transaction, or null when it could not start (then every unit was told why). */
  private async beginBatch(items: typeof this.batch): Promise<ControlledTransaction<DB> | null> {
    try {
      return await this.store.db.startTransaction().execute();
    } catch (error) {
      for (const item of items) item.reject(error);
      return null;
    }
  }

  /** Commits, then settles each unit: its hooks and its caller. A failed commit fails them all. */
  private async commitBatch(trx: ControlledTransaction<DB>, items: typeof this.batch, units: UnitRun[], outcomes: BatchOutcome[]): Promise<void> {
    try {
      await trx.commit().execute();
    } catch (error) {
      await trx.rollback().execute().catch(() => {});
      for (const [i, item] of items.entries()) {
        units[i]!.rolledBack();
        item.reject(error);
      }
      return;
    }
    for (const [i, item] of items.entries()) {
      const outcome = outcomes[i]!;
      if (outcome.ok) {
        units[i]!.committed();
        item.resolve(outcome.value);
      } else {
        units[i]!.rolledBack();
        item.reject(outcome.error);
      }
    }
  }

  /** Resolves once no grouped transaction is under way (the store may close next). */
  async drained(): Promise<void> {
    await new Promise<void>((resolve) => {
      const check = () => (this.flushing ? setTimeout(check, 5) : resolve());
      check();
    });
  }
}
