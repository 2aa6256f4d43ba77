import { setTimeout as setTimeoutPromise } from 'node:timers/promises';
import type { Job, JobKind } from '../store/schema.ts';
import type { Store } from '../store/store.ts';
import { isStoreUnavailable } from '../store/unavailable.ts';
import type { Bus, BusEvent } from './bus.ts';
import { Transactions } from './transactions.ts';
import type { RepeatableWork, UnitOfWork } from './unit-of-work.ts';
import {
  claimInTransaction, countOpenJobs, findClaimable, finishedJobs, finishJob, getJob, hasQueuedJobs, insertJob, releaseJob, renewLeases,
  requeueAllRunning, lockAgentLine, requeueExpired, type NewJob, type OpenJobCounts,
} from './queue-sql.ts';

/** How soon a finished turn's outcome is written again when the store could not take it, and the longest pause between tries. */
const FINISH_RETRY_FIRST_MS = 250;
const FINISH_RETRY_MAX_MS = 4000;
/** After that long the store's trouble is not taken for a passing one: the outcome is given up as any other (see execute). */
const FINISH_RETRY_FOR_MS = 10 * 60_000;
/** At shutdown, how long turns still running when the grace period ends are given to stop once aborted (see stop). */
const STOP_AFTER_ABORT_MS = 5000;


/** The turn a finished job wrote, handed straight to waiters on this instance (no re-read). */
export interface ReplyTurn {
  text: string;
  ts: string;
}

/**
 * What finishing a job writes, inside the transaction that marks it done. Like any
 * RepeatableWork it may run more than once, so it acts only through `tx`.
 */
export type Finisher = (tx: UnitOfWork) => Promise<{
  status: 'done' | 'failed';
  replyTurnId: number | null;
  reply?: ReplyTurn;
}>;

/** A finished (or still open) job, and its reply turn when this instance already knows it. */
export interface JobState {
  job: Job;
  reply?: ReplyTurn;
}

/** A waiter registered for one job (see TurnEngine.watch). */
export interface JobWatch {
  /**
   * The job once finished, or as it stands after `timeoutMs` or once `gone` aborts (whoever
   * waited has left: the job runs on regardless); `current` is the job as the caller last knew it, if at all.
   */
  wait(timeoutMs: number, current: Job | null, gone?: AbortSignal): Promise<JobState>;
  /** Stops listening (the enqueuing transaction rolled back). */
  cancel(): void;
}

/**
 * How a run of a job on this runner ended: its outcome written (`done`, `failed`), or `requeued`:
 * not written here, the job runs again (a shutdown, the store away, its lease taken over).
 */
export const RUN_OUTCOMES = ['done', 'failed', 'requeued'] as const;
export type RunOutcome = typeof RUN_OUTCOMES[number];

/** Told of each run of a job on this runner, for its metrics; called synchronously (what it throws is reported and ignored). */
export interface TurnObserver {
  /** A run starts: `waitedMs` in line since accepted (first runs only), `resumed` for a run after an interrupted one. */
  started(run: { kind: JobKind; waitedMs: number | null; resumed: boolean }): void;
  ended(run: { kind: JobKind; outcome: RunOutcome; ranMs: number }): void;
}

/** The work itself (brain calls and their results) lives above the engine, in services. */
export interface JobHandler {
  /** Does the work. Must stop promptly (throwing) when `signal` aborts. */
  run(job: Job, signal: AbortSignal): Promise<Finisher>;
  /** What to record when run() threw, or the job kept crashing its runner. */
  failure(job: Job, error: unknown): Finisher;
}

export interface TurnEngineOptions {
  store: Store;
  bus: Bus;
  instanceId: string;
  /** Units of work running at once per agent (the contract's "one turn at a time" is 1). */
  perAgent: number;
  /** Jobs this runner runs at once, across agents. */
  concurrency: number;
  leaseMs: number;
  /** Safety-net scan for work, in case a wake-up was missed. */
  pollMs?: number;
  /** A job claimed this many times (its runner kept dying) is failed instead of retried. */
  maxAttempts?: number;
  onError?: (error: unknown, context: string) => void;
}

class LeaseLost extends Error {}


/**
 * The TurnEngine: a runner over the service's own `jobs` table, the same on SQLite and
 * PostgreSQL. FIFO per agent, agents in parallel, leases renewed by a heartbeat, expired
 * leases re-queued (a crashed instance's work resumes), finishing guarded by the lease so a
 * reply lands exactly once.
 */
export class TurnEngine {
  private readonly options: Required<Omit<TurnEngineOptions, 'onError'>> & Pick<TurnEngineOptions, 'onError'>;
  private handler: JobHandler | null = null;
  private readonly active = new Map<number, { controller: AbortController; settled: Promise<void> }>();
  private readonly waiters = new Map<number, Set<(state?: JobState) => void>>();
  /** Slots promised to jobs claimed inside a transaction that has not committed yet. */
  private reserved = 0;
  private readonly transactions: Transactions;
  private readonly timers: NodeJS.Timeout[] = [];
  private unsubscribe: (() => void) | null = null;
  private readonly observers = new Set<TurnObserver>();
  private filling = false;
  private refill = false;
  /**
   * False only after a scan found nothing queued and no sign of new work came since. A slot or a
   * line freed by a finished job matters only while work may be queued, so then no scan runs
   * (the per-turn scan was a query per finished turn). The poll timer sets it again anyway.
   */
  private workMaybeQueued = true;
  private started = false;
  private stopping = false;
  private readonly stopController = new AbortController();
  /** Aborted as the engine starts to stop: work outside a turn (a judge's model call) gives up then. */
  readonly stopSignal: AbortSignal = this.stopController.signal;

  constructor(options: TurnEngineOptions) {
    this.options = { pollMs: 1000, maxAttempts: 5, ...options };
    this.transactions = new Transactions(options.store, options.bus, (error, context) => this.options.onError?.(error, context));
  }


  /** The time leases are written and compared by: the store's, which every instance shares. */
  private now(): number {
    return this.options.store.clock.now();
  }

  setHandler(handler: JobHandler): void {
    this.handler = handler;
  }

  /**
   * Renews the leases of the jobs running here. A job whose lease is gone (the store was away
   * for longer than a lease, and another instance took the job over) is stopped here: its work
   * is the other runner's now, and its outcome could not be written by this one anyway.
   */
  private async renewOwnLeases(): Promise<void> {
    const ids = [...this.active.keys()];
    const renewed = new Set(await renewLeases(this.options.store.db, this.options.instanceId, ids, this.options.leaseMs, this.now()));
    for (const id of ids) if (!renewed.has(id)) this.active.get(id)?.controller.abort();
  }

  /** Wakes waiters and runners for events from this or any other instance. */
  private dispatch = (event: BusEvent): void => {
    if (event.type === 'job_done') {
      this.wakeWaiters(event.jobId);
      this.slotFreed();
    } else if (event.type === 'job_enqueued') {
      this.kick();
    } else if (event.type === 'job_cancelled') {
      // Its outcome is written already (the cancel's): the run here only has to stop.
      this.active.get(event.jobId)?.controller.abort();
    }
  };

  private wakeWaiters(jobId: number, state?: JobState): void {
    const waiting = this.waiters.get(jobId);
    if (waiting) for (const wake of waiting) wake(state);
  }

  /** Recovers interrupted work, then runs jobs until stop(). Also safe to call without a handler (no runner). */
  async start(): Promise<void> {
    if (this.started) return;
    this.started = true;
    this.unsubscribe = this.options.bus.on(this.dispatch);
    if (!this.handler) return;
    const { db, dialect } = this.options.store;
    // One SQLite file has one server: anything "running" there was cut off by a crash.
    // On PostgreSQL other instances may be alive, so only expired leases are taken over.
    if (dialect === 'sqlite') await requeueAllRunning(db);
    else await requeueExpired(db, this.now());
    const every = (ms: number, fn: () => Promise<unknown>) => {
      const timer = setInterval(() => fn().catch((e) => this.options.onError?.(e, 'engine timer')), ms);
      timer.unref();
      this.timers.push(timer);
    };
    every(Math.max(200, Math.floor(this.options.leaseMs / 3)), () => this.renewOwnLeases());
    every(Math.max(200, Math.floor(this.options.leaseMs / 2)), async () => {
      // Own leases first: after the store was away for longer than a lease, this instance's own
      // running jobs look expired too, and must not be put back in line (and run again) here.
      await this.renewOwnLeases();
      // Announced like new work, so that every instance (not only this one) looks for it.
      await this.transact(async (tx) => {
        for (const agentId of await requeueExpired(tx.db, this.now())) await tx.publish({ type: 'job_enqueued', agentId });
      });
    });
    every(this.options.pollMs, async () => this.kick());
    this.kick();
  }

  /** See Transactions.transact: events published inside, delivered after the commit; grouped on SQLite. */
  transact<T>(work: RepeatableWork<T>): Promise<T> {
    return this.transactions.transact(work);
  }

  /** Grouped transactions (SQLite) run, and how many of them had to run again unit by unit. */
  get batchStats(): { batches: number; replays: number } {
    return this.transactions.stats;
  }

  /**
   * Enqueues a job inside the caller's transaction. When this runner has a free slot and the
   * agent has room in its line, the job is inserted already claimed and starts the moment the
   * transaction commits (no second statement, no scan); otherwise runners are told there is work.
   */
  async enqueue(tx: UnitOfWork, job: NewJob): Promise<Job> {
    // Whatever fails from here on, the rollback gives back the slot this unit took, and runners
    // look again: the agent's line was held by this transaction, so a claim may have given up.
    let reservedHere = false;
    tx.onRollback(() => {
      if (reservedHere) this.reserved--;
      this.kick();
    });
    await lockAgentLine(tx.db, this.options.store, job.agentId);
    if (this.canRunMore()) {
      this.reserved++; // held from here, so concurrent enqueues never promise the same slot twice
      reservedHere = true;
    }
    const row = await insertJob(tx.db, job, reservedHere ? { owner: this.options.instanceId, leaseMs: this.options.leaseMs, perAgent: this.options.perAgent } : null, this.now());
    const claim = row.status === 'running';
    if (reservedHere && !claim) {
      this.reserved--;
      reservedHere = false;
    }
    if (claim) {
      tx.afterCommit(() => {
        this.reserved--;
        this.launch(row);
      });
    } else {
      await tx.publish({ type: 'job_enqueued', agentId: job.agentId });
    }
    return row;
  }

  private canRunMore(): boolean {
    return !!this.handler && this.started && !this.stopping && this.active.size + this.reserved < this.options.concurrency;
  }

  /** There may be new work in the queue: look for startable work soon (coalesced). */
  kick(): void {
    this.workMaybeQueued = true;
    this.lookForWork();
  }

  /**
   * After a gap in the wake-ups from other instances (the bus lost its connection and is back):
   * what ended or was queued elsewhere meanwhile was announced to nobody here. Looks at the queue,
   * and at every job a request here waits for, now rather than at the next poll or its timeout.
   */
  async caughtUp(): Promise<void> {
    this.kick();
    for (const job of await finishedJobs(this.options.store.db, [...this.waiters.keys()])) this.wakeWaiters(job.id, { job });
  }

  /** A job ended here or elsewhere: its slot or its agent's line is free for queued work, if any. */
  private slotFreed(): void {
    // While a scan runs the flag is down, and the scan may have read the queue before this job
    // ended: ask for another look (lookForWork coalesces it into one rescan).
    if (this.workMaybeQueued || this.filling) this.lookForWork();
  }

  private lookForWork(): void {
    if (!this.handler || !this.started || this.stopping) return;
    if (this.filling) {
      this.refill = true;
      return;
    }
    this.filling = true;
    setImmediate(() => {
      this.fill().catch((e) => {
        this.workMaybeQueued = true; // the scan did not finish: nothing is known
        this.options.onError?.(e, 'claiming work');
      }).finally(() => {
        this.filling = false;
        if (this.refill) {
          this.refill = false;
          this.lookForWork();
        }
      });
    });
  }

  private async fill(): Promise<void> {
    const { db } = this.options.store;
    while (this.canRunMore()) {
      const free = this.options.concurrency - this.active.size - this.reserved;
      if (free <= 0) return;
      // Cleared before the scan: work queued while it runs marks it again (and rescans).
      this.workMaybeQueued = false;
      const candidates = await findClaimable(db, this.options.perAgent, free * 2);
      // Jobs behind a busy agent are not candidates yet, but they start when its line frees.
      if (candidates.length > 0 || (await hasQueuedJobs(db))) this.workMaybeQueued = true;
      if (candidates.length === 0) return;
      let claimedAny = false;
      for (const candidate of candidates) {
        if (!this.canRunMore()) return;
        // Put back in line by another instance while its run here goes on (this one's lease ran
        // out while the store was away): never a second run of it here. The heartbeat stops the
        // first, and the job is claimed afresh once that run has let go of it.
        if (this.active.has(candidate.id)) continue;
        const job = await this.transact((tx) => claimInTransaction(tx.db, this.options.store, candidate, this.options.instanceId,
          this.options.leaseMs, this.options.perAgent));
        if (job) {
          claimedAny = true;
          this.launch(job);
        }
      }
      if (!claimedAny) return;
    }
  }

  private launch(job: Job): void {
    const controller = new AbortController();
    // started_at is the job's first run's; this run's claim is when its lease began. A run that
    // began before it was cut off (a crash, a lost lease, a shutdown) and this one takes it up.
    const claimedAt = Date.parse(job.lease_expires_at ?? '') - this.options.leaseMs;
    const firstRunAt = Date.parse(job.started_at ?? '');
    const resumed = firstRunAt < claimedAt;
    const waitedMs = resumed || Number.isNaN(firstRunAt) ? null : Math.max(0, firstRunAt - Date.parse(job.created_at));
    this.tellObservers((observer) => observer.started({ kind: job.kind, waitedMs, resumed }));
    const startedAt = performance.now();
    const settled = this.execute(job, controller.signal)
      .catch((e): RunOutcome => {
        this.options.onError?.(e, `job ${job.id}`);
        return 'requeued'; // nothing written: the lease brings the job back
      })
      .then((outcome) => {
        const ranMs = performance.now() - startedAt;
        this.tellObservers((observer) => observer.ended({ kind: job.kind, outcome, ranMs }));
      })
      .finally(() => {
        this.active.delete(job.id);
        this.slotFreed();
      });
    this.active.set(job.id, { controller, settled });
  }

  private async execute(job: Job, signal: AbortSignal): Promise<RunOutcome> {
    const handler = this.handler!;
    let finisher: Finisher;
    if (job.attempts > this.options.maxAttempts) {
      finisher = handler.failure(job, new Error(`gave up after ${job.attempts - 1} interrupted attempts`));
    } else {
      try {
        finisher = await handler.run(job, signal);
      } catch (error) {
        // Stopped (a shutdown, a lease lost), or the store went away under the turn's own reads
        // and writes: not the turn's failure. Back in line, and announced: this or another
        // instance takes it up again. (With the store away the release fails too, and the
        // lease brings the job back.)
        if (signal.aborted || isStoreUnavailable(error)) {
          await this.transact(async (tx) => {
            if (await releaseJob(tx.db, job.id, this.options.instanceId)) await tx.publish({ type: 'job_enqueued', agentId: job.agent_id });
          });
          return 'requeued';
        }
        finisher = handler.failure(job, error);
      }
    }
    try {
      return await this.finishWhenTheStoreAnswers(job, finisher, signal);
    } catch (error) {
      // Lease lost: another runner took the job over and writes its result.
      if (error instanceof LeaseLost) return 'requeued';
      // Shutting down while the store was away: the outcome is not written, and the lease
      // brings the job back at the next start (or to another instance).
      if (isStoreUnavailable(error)) return 'requeued';
      // The outcome could not be written (its session is gone, say): record the failure
      // instead, and failing even that, close the job with no turn rather than retry forever.
      // If the database itself is away, this fails too and the lease brings the job back.
      this.options.onError?.(error, `finishing job ${job.id}`);
      try {
        return (await this.finish(job, handler.failure(job, error))).status;
      } catch {
        return (await this.finish(job, async () => ({ status: 'failed', replyTurnId: null }))).status;
      }
    }
  }

  /**
   * finish(), tried again while the store cannot be reached (a full disk, a database restarting):
   * a turn that ended is not run again, nor recorded as failed, for want of a write. The job stays
   * this runner's meanwhile, its lease renewed once the store is back; the tries end when the
   * lease is found lost (another runner took it over), or at shutdown (the job is then released
   * by its lease). Any other error is the outcome's own, for the caller.
   */
  private async finishWhenTheStoreAnswers(job: Job, finisher: Finisher, signal: AbortSignal): Promise<'done' | 'failed'> {
    const giveUpAt = Date.now() + FINISH_RETRY_FOR_MS;
    for (let pauseMs = FINISH_RETRY_FIRST_MS; ; pauseMs = Math.min(pauseMs * 2, FINISH_RETRY_MAX_MS)) {
      try {
        return (await this.finish(job, finisher)).status;
      } catch (error) {
        if (!isStoreUnavailable(error) || this.stopping || signal.aborted || Date.now() > giveUpAt) throw error;
        this.options.onError?.(error, `writing the outcome of job ${job.id} (tried again in ${pauseMs} ms)`);
        await setTimeoutPromise(pauseMs, undefined, { signal }).catch(() => {}); // a lease lost ends the pause
        if (signal.aborted) throw error;
      }
    }
  }

  /** Writes a job's outcome and marks it finished, if this runner still holds its lease. */
  private finish(job: Job, finisher: Finisher) {
    return this.transact(async (tx) => {
      const outcome = await finisher(tx);
      const finishedAt = this.now();
      const held = await finishJob(tx.db, job.id, this.options.instanceId, outcome.status, outcome.replyTurnId, finishedAt);
      if (!held) throw new LeaseLost();
      await tx.publish({ type: 'job_done', jobId: job.id });
      // Waiters on this instance get the outcome at once (no re-read); others re-read it.
      tx.afterCommit(() => this.wakeWaiters(job.id, {
        job: { ...job, status: outcome.status, reply_turn_id: outcome.replyTurnId, lease_owner: null, lease_expires_at: null, finished_at: new Date(finishedAt).toISOString() },
        ...(outcome.reply ? { reply: outcome.reply } : {}),
      }));
      return outcome;
    });
  }

  /**
   * Starts listening for a job's end now: called inside the transaction that enqueues it, no
   * wake-up can be missed, and the waiter needs no read to learn what it already knows.
   */
  watch(jobId: number): JobWatch {
    let wake!: (state?: JobState) => void;
    const woken = new Promise<JobState | undefined>((resolve) => { wake = resolve; });
    let set = this.waiters.get(jobId);
    if (!set) this.waiters.set(jobId, (set = new Set()));
    set.add(wake);
    const waiters = set;
    const cancel = () => {
      waiters.delete(wake);
      if (waiters.size === 0 && this.waiters.get(jobId) === waiters) this.waiters.delete(jobId);
    };
    const { db } = this.options.store;
    return {
      cancel,
      wait: async (timeoutMs, current, gone) => {
        const timer = setTimeout(wake, timeoutMs);
        const leave = () => wake();
        gone?.addEventListener('abort', leave, { once: true });
        try {
          const job = current ?? await getJob(db, jobId);
          if (!job) throw new Error(`job ${jobId} does not exist`);
          if (isFinished(job) || timeoutMs <= 0 || gone?.aborted) return { job };
          const state = await woken;
          if (state) return state;
          // A wake-up from elsewhere, or the wait's end: read where the job stands. If the store
          // cannot say just now, the job as last known (accepted, not finished: a 202 to poll)
          // rather than an error for a message that was accepted.
          return { job: (await getJob(db, jobId).catch((error: unknown) => {
            if (isStoreUnavailable(error)) return job;
            throw error;
          })) ?? job };
        } finally {
          clearTimeout(timer);
          gone?.removeEventListener('abort', leave);
          cancel();
        }
      },
    };
  }

  /** An observer that throws is reported, never let to stop a run or the engine (metrics are not worth a turn). */
  private tellObservers(tell: (observer: TurnObserver) => void): void {
    for (const observer of this.observers) {
      try {
        tell(observer);
      } catch (error) {
        this.options.onError?.(error, 'a turn observer (metrics)');
      }
    }
  }

  /** Tells `observer` of every run on this runner from now on, until the returned function is called. */
  observe(observer: TurnObserver): () => void {
    this.observers.add(observer);
    return () => { this.observers.delete(observer); };
  }

  /** Jobs running on this runner now. */
  get running(): number {
    return this.active.size;
  }

  /** The deployment's unfinished jobs (every instance's), by status: one read of the open jobs' index. */
  openJobs(): Promise<OpenJobCounts> {
    return countOpenJobs(this.options.store.db);
  }

  /** How many waits (requests on this instance awaiting a job's end) are open now. */
  get waiting(): number {
    let count = 0;
    for (const set of this.waiters.values()) count += set.size;
    return count;
  }

  /** The job once it has finished, or as it stands when `timeoutMs` runs out. */
  waitForJob(jobId: number, timeoutMs: number): Promise<JobState> {
    return this.watch(jobId).wait(timeoutMs, null);
  }

  /** Stops claiming; lets running jobs finish within `graceMs`; gives the rest back to the queue. */
  async stop(graceMs: number): Promise<void> {
    if (this.stopping) return;
    this.stopping = true;
    this.stopController.abort();
    for (const timer of this.timers) clearInterval(timer);
    const running = [...this.active.values()];
    const allSettled = Promise.all(running.map((r) => r.settled));
    let graceTimer: NodeJS.Timeout | undefined;
    const graceOver = new Promise<'timeout'>((resolve) => { graceTimer = setTimeout(() => resolve('timeout'), graceMs); });
    const outcome = await Promise.race([allSettled.then(() => 'done' as const), graceOver]);
    clearTimeout(graceTimer);
    if (outcome === 'timeout') {
      for (const r of this.active.values()) r.controller.abort();
      await Promise.race([Promise.all([...this.active.values()].map((r) => r.settled)), new Promise((r) => setTimeout(r, STOP_AFTER_ABORT_MS).unref())]);
    }
    this.unsubscribe?.();
    for (const set of this.waiters.values()) for (const wake of set) wake();
    await this.transactions.drained();
  }

}

export const isFinished = (job: Pick<Job, 'status'>): boolean => job.status === 'done' || job.status === 'failed';
