import type { ControlledTransaction, Transaction } from 'kysely';
import type { DB } from '../store/schema.ts';
import { runFixedStatement, sqliteTransactionOpen } from '../store/sqlite-transaction.ts';
import type { Store } from '../store/store.ts';
import type { Bus, BusEvent } from './bus.ts';

/** Inside a transaction: run this once it has committed, or this if it rolled back. */
export interface TxHooks {
  afterCommit(fn: () => void): void;
  onRollback(fn: () => void): void;
}

export type Stage = (event: BusEvent) => Promise<void>;
/**
 * A unit of work inside a transaction. It may be run more than once (see Transactions.runBatch),
 * so whatever it does outside the database goes through `stage` and `hooks`: each run's are
 * settled with that run, and only the last run's result reaches the caller.
 */
export type TransactionWork<T> = (trx: Transaction<DB>, stage: Stage, hooks: TxHooks) => Promise<T>;

type BatchOutcome = { ok: true; value: unknown } | { ok: false; error: unknown };
/** Batches run with a savepoint per unit after one had to be replayed (see runBatch). */
const SAVEPOINT_BATCHES_AFTER_REPLAY = 20;

/**
 * The engine's transactions: each unit of work stages its events inside its transaction, and
 * they are delivered (and its hooks run) once it has committed. On SQLite, units that arrive
 * while a commit is under way share the next transaction (group commit).
 */
export class Transactions {
  private readonly store: Store;
  private readonly bus: Bus;
  private readonly onError: (error: unknown, context: string) => void;
  private readonly batch: Array<{ work: TransactionWork<unknown>; resolve(value: unknown): void; reject(error: unknown): void }> = [];
  private flushing = false;
  private savepointBatchesLeft = 0;
  /** Grouped transactions (SQLite) run, and how many of them had to run again unit by unit. */
  readonly stats = { batches: 0, replays: 0 };

  constructor(store: Store, bus: Bus, onError: (error: unknown, context: string) => void) {
    this.store = store;
    this.bus = bus;
    this.onError = onError;
  }

  /**
   * Runs a transaction whose events are staged inside it and delivered after it commits.
   * On SQLite, transactions that arrive while one is committing are grouped into the next
   * one: one commit, and its file-system round trips, serve many requests. One failing never
   * affects another (see runBatch: when one fails, the others run again). Nobody is answered
   * before the commit.
   */
  async transact<T>(work: TransactionWork<T>): Promise<T> {
    if (this.store.dialect !== 'sqlite') return this.transactAlone(work);
    return new Promise<T>((resolve, reject) => {
      this.batch.push({ work: work as TransactionWork<unknown>, resolve: resolve as (value: unknown) => void, reject });
      this.flushBatches();
    });
  }

  private async transactAlone<T>(work: TransactionWork<T>): Promise<T> {
    const unit = this.newUnit();
    try {
      const result = await this.store.db.transaction().execute((trx) => work(trx, unit.stageIn(trx), unit));
      unit.committed();
      return result;
    } catch (error) {
      unit.rolledBack();
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
   * (a savepoint per unit, and the copies of pages it keeps, were an eighth of a turn's CPU on a
   * database grown by use). If one fails, the whole transaction rolls back, every unit that ran
   * is told so through its hooks, and the batch runs again with each unit in a savepoint of its
   * own, so the failure touches no other unit. After such a replay the next batches go straight
   * to savepoints for a while: a stream of failing units (duplicates, say) costs no more than it
   * did before.
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
    const units: UnitHooks[] = [];
    const outcomes: BatchOutcome[] = [];
    for (const item of items) {
      const unit = this.newUnit();
      units.push(unit);
      try {
        outcomes.push({ ok: true, value: await item.work(trx, unit.stageIn(trx), unit) });
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
    const units = items.map(() => this.newUnit());
    const outcomes: BatchOutcome[] = [];
    for (const [i, item] of items.entries()) {
      const name = `unit${i}`;
      try {
        await runFixedStatement(trx, `savepoint ${name}`);
        try {
          const value = await item.work(trx, units[i]!.stageIn(trx), units[i]!);
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

  private newUnit(): UnitHooks {
    return new UnitHooks(this.bus, (error) => this.onError(error, 'transaction hook'));
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
  private async commitBatch(trx: ControlledTransaction<DB>, items: typeof this.batch, units: UnitHooks[], outcomes: BatchOutcome[]): Promise<void> {
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

/** Events staged and callbacks registered by one unit of work, settled with its transaction. */
class UnitHooks implements TxHooks {
  // Keyed by content: a unit that stages the same event twice (a decision enqueuing one agent's
  // continuations, say) delivers it once; wake-ups say nothing more the second time.
  private readonly events = new Map<string, BusEvent>();
  private readonly commitFns: Array<() => void> = [];
  private readonly rollbackFns: Array<() => void> = [];
  private readonly bus: Bus;
  private readonly onError: (error: unknown) => void;
  private settled = false;

  /** `onError` hears of a callback that threw: the others still run, and every caller is still answered. */
  constructor(bus: Bus, onError: (error: unknown) => void) {
    this.bus = bus;
    this.onError = onError;
  }

  /** Records the event for delivery after commit, and lets the bus stage it in `trx` (NOTIFY). */
  stageIn(trx: Transaction<DB>): Stage {
    return async (event) => {
      const key = JSON.stringify(event);
      if (this.events.has(key)) return;
      this.events.set(key, event);
      await this.bus.stage(trx, event);
    };
  }

  afterCommit(fn: () => void): void {
    this.commitFns.push(fn);
  }

  onRollback(fn: () => void): void {
    this.rollbackFns.push(fn);
  }

  /**
   * Callbacks first: they may hand results to local waiters before bus events wake them bare.
   * A unit settles once: committed or rolled back, whichever is called first.
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
