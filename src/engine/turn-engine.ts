import type { Job } from '../store/schema.ts';
import type { Store } from '../store/store.ts';
import type { Bus, BusEvent } from './bus.ts';
import type { JobHandler, JobState, JobWatch, TurnObserver } from './ports.ts';
import { countOpenJobs, type NewJob, type OpenJobCounts } from './queue-sql.ts';
import { ClaimingSystem } from './systems/claiming.ts';
import { LeaseSystem } from './systems/leases.ts';
import { RunObservers } from './systems/observers.ts';
import { RunnerState, type EngineResources } from './systems/resources.ts';
import { RunningSystem } from './systems/running.ts';
import { Slots } from './systems/slots.ts';
import { Wakeups } from './wakeups.ts';
import { WaitingSystem } from './systems/waiters.ts';
import { Transactions } from './transactions.ts';
import type { RepeatableWork, UnitOfWork } from './unit-of-work.ts';

export { isFinished, RUN_OUTCOMES } from './ports.ts';
export type { Finisher, JobHandler, JobState, JobWatch, RunOutcome, TurnObserver } from './ports.ts';

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

/**
 * The TurnEngine: a runner over the service's own `jobs` table, the same on SQLite and
 * PostgreSQL. FIFO per agent, agents in parallel, leases renewed by a heartbeat, expired
 * leases re-queued (a crashed instance's work resumes), finishing guarded by the lease so a
 * reply lands exactly once.
 *
 * This class is the engine's one face; the work is done by its systems (systems/), each with
 * one role, sharing one EngineResources: claiming work, running it, the leases, the waiters.
 */
export class TurnEngine {
  private readonly shared: EngineResources;
  private readonly pollMs: number;
  private readonly transactions: Transactions;
  private readonly observers: RunObservers;
  private readonly systems: { waiting: WaitingSystem; running: RunningSystem; claiming: ClaimingSystem; leases: LeaseSystem };
  private readonly timers: NodeJS.Timeout[] = [];
  private unsubscribe: (() => void) | null = null;
  private readonly stopController = new AbortController();
  /** Aborted as the engine starts to stop: work outside a turn (a judge's model call) gives up then. */
  readonly stopSignal: AbortSignal = this.stopController.signal;
  /** Requests held on a session's next turn or a person's next event (long-polls, streams). */
  readonly wakeups: Wakeups;

  constructor(options: TurnEngineOptions) {
    const { store, bus, instanceId, perAgent, concurrency, leaseMs, pollMs = 1000, maxAttempts = 5, onError } = options;
    const report = (error: unknown, context: string) => onError?.(error, context);
    this.pollMs = pollMs;
    this.wakeups = new Wakeups(bus);
    this.transactions = new Transactions(store, bus, report);
    const transactions = this.transactions;
    this.shared = {
      store,
      bus,
      settings: { instanceId, perAgent, concurrency, leaseMs, maxAttempts },
      runner: new RunnerState(),
      slots: new Slots(concurrency),
      transact: (work) => transactions.transact(work),
      report,
      now: () => store.clock.now(),
    };
    this.observers = new RunObservers(report);
    const waiting = new WaitingSystem(this.shared);
    const running = new RunningSystem({
      shared: this.shared, waiting, observers: this.observers,
      onRunEnded: () => claiming.scanIfWorkMayBeQueued(),
    });
    const claiming = new ClaimingSystem(this.shared, running, this.observers);
    this.systems = { waiting, running, claiming, leases: new LeaseSystem(this.shared) };
  }

  setHandler(handler: JobHandler): void {
    this.shared.runner.handler = handler;
  }

  /** Recovers interrupted work, then runs jobs until stop(). Also safe to call without a handler (no runner). */
  async start(): Promise<void> {
    const { runner, bus } = this.shared;
    if (runner.started) return;
    runner.started = true;
    this.unsubscribe = bus.on(this.onBusEvent);
    if (!runner.handler) return;
    await this.systems.leases.recoverInterruptedWork();
    this.every(this.systems.leases.renewEveryMs, () => this.systems.leases.renewOwnLeases());
    this.every(this.systems.leases.takeOverEveryMs, () => this.systems.leases.takeOverExpiredLeases());
    this.every(this.pollMs, () => this.systems.claiming.lookForWork());
    void this.systems.claiming.lookForWork();
  }

  private every(ms: number, fn: () => Promise<unknown>): void {
    const timer = setInterval(() => fn().catch((e) => this.shared.report(e, 'engine timer')), ms);
    timer.unref();
    this.timers.push(timer);
  }

  /** Wakes waiters and looks for work on events from this or any other instance. */
  private onBusEvent = (event: BusEvent): void => {
    if (event.type === 'job_done') {
      this.systems.waiting.wake(event.jobId);
      this.systems.claiming.scanIfWorkMayBeQueued();
    } else if (event.type === 'job_enqueued') {
      void this.systems.claiming.lookForWork();
    } else if (event.type === 'job_cancelled') {
      // Its outcome is written already (the cancel's): the run here only has to stop.
      this.shared.slots.abort(event.jobId);
    }
  };

  /** See Transactions.transact: events published inside, delivered after the commit; grouped on SQLite. */
  transact<T>(work: RepeatableWork<T>): Promise<T> {
    return this.transactions.transact(work);
  }

  /** Grouped transactions (SQLite) run, and how many of them had to run again unit by unit. */
  get batchStats(): { batches: number; replays: number } {
    return this.transactions.stats;
  }

  /** Enqueues a job inside the caller's transaction; see ClaimingSystem.enqueue (it may be claimed at once). */
  enqueue(tx: UnitOfWork, job: NewJob): Promise<Job> {
    return this.systems.claiming.enqueue(tx, job);
  }

  /**
   * There may be new work in the queue: looks for startable work soon (one scan, however often
   * asked meanwhile). Resolves once a scan begun after this call has ended.
   */
  lookForWork(): Promise<void> {
    return this.systems.claiming.lookForWork();
  }

  /**
   * After a gap in the wake-ups from other instances (the bus lost its connection and is back):
   * what ended or was queued elsewhere meanwhile was announced to nobody here. Looks at the queue,
   * and at every job a request here waits for, now rather than at the next poll or its timeout.
   */
  async caughtUp(): Promise<void> {
    void this.systems.claiming.lookForWork();
    await this.systems.waiting.wakeThoseFinished();
  }

  /** See WaitingSystem.watch: called inside the transaction that enqueues the job. */
  watch(jobId: number): JobWatch {
    return this.systems.waiting.watch(jobId);
  }

  /** The job once it has finished, or as it stands when `timeoutMs` runs out. */
  waitForJob(jobId: number, timeoutMs: number): Promise<JobState> {
    return this.systems.waiting.watch(jobId).wait(timeoutMs, null);
  }

  /** Tells `observer` of every run on this runner from now on, until the returned function is called. */
  observe(observer: TurnObserver): () => void {
    return this.observers.add(observer);
  }

  /** Jobs running on this runner now. */
  get running(): number {
    return this.shared.slots.running;
  }

  /** How many waits (requests on this instance awaiting a job's end) are open now. */
  get waiting(): number {
    return this.systems.waiting.count;
  }

  /** The deployment's unfinished jobs (every instance's), by status: one read of the open jobs' index. */
  openJobs(): Promise<OpenJobCounts> {
    return countOpenJobs(this.shared.store.db);
  }

  /** Stops claiming; lets running jobs finish within `graceMs`; gives the rest back to the queue. */
  async stop(graceMs: number): Promise<void> {
    const { runner } = this.shared;
    if (runner.stopping) return;
    runner.stopping = true;
    this.stopController.abort();
    for (const timer of this.timers) clearInterval(timer);
    await this.systems.running.stopRuns(graceMs);
    this.unsubscribe?.();
    this.systems.waiting.wakeAll();
    await this.transactions.drained();
  }
}
