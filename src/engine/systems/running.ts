import { setTimeout as setTimeoutPromise } from 'node:timers/promises';
import type { Job } from '../../store/schema.ts';
import { isStoreUnavailable } from '../../store/unavailable.ts';
import type { Finisher, RunOutcome } from '../ports.ts';
import { finishJob, releaseJob } from '../queue-sql.ts';
import type { RunObservers } from './observers.ts';
import type { EngineResources } from './resources.ts';
import type { WaitingSystem } from './waiters.ts';

/** How soon a finished turn's outcome is written again when the store could not take it, and the longest pause between tries. */
const FINISH_RETRY_FIRST_MS = 250;
const FINISH_RETRY_MAX_MS = 4000;
/** After that long the store's trouble is not taken for a passing one: the outcome is given up as any other (see runToOutcome). */
const FINISH_RETRY_FOR_MS = 10 * 60_000;
/** At shutdown, how long turns still running when the grace period ends are given to stop once aborted. */
const STOP_AFTER_ABORT_MS = 5000;

/** The job's lease is another runner's now: this runner's outcome is not written. */
class LeaseLost extends Error {}

export interface RunningSystemOptions {
  shared: EngineResources;
  waiting: WaitingSystem;
  observers: RunObservers;
  /** A run has let go of its slot: queued work may start in it. */
  onRunEnded: () => void;
}

/**
 * Runs the jobs claimed here, each in a slot, and writes their outcomes: guarded by the lease, so
 * that a reply lands exactly once, and tried again while the store is away.
 */
export class RunningSystem {
  private readonly shared: EngineResources;
  private readonly waiting: WaitingSystem;
  private readonly observers: RunObservers;
  private readonly onRunEnded: () => void;

  constructor(options: RunningSystemOptions) {
    this.shared = options.shared;
    this.waiting = options.waiting;
    this.observers = options.observers;
    this.onRunEnded = options.onRunEnded;
  }

  /** Starts a run of a job this runner has just claimed; it holds a slot until it ends. */
  launch(job: Job): void {
    const controller = new AbortController();
    this.observers.tell((observer) => observer.started({ kind: job.kind, ...howTheRunStarts(job, this.shared.settings.leaseMs) }));
    const startedAt = performance.now();
    const settled = this.runToOutcome(job, controller.signal)
      .catch((e): RunOutcome => {
        this.shared.report(e, `job ${job.id}`);
        return 'requeued'; // nothing written: the lease brings the job back
      })
      .then((outcome) => {
        const ranMs = performance.now() - startedAt;
        this.observers.tell((observer) => observer.ended({ kind: job.kind, outcome, ranMs }));
      })
      .finally(() => {
        this.shared.slots.vacate(job.id);
        this.onRunEnded();
      });
    this.shared.slots.occupy(job.id, { controller, settled });
  }

  private async runToOutcome(job: Job, signal: AbortSignal): Promise<RunOutcome> {
    const handler = this.shared.runner.handler!;
    const { instanceId, maxAttempts } = this.shared.settings;
    let finisher: Finisher;
    if (job.attempts > maxAttempts) {
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
          await this.shared.transact(async (tx) => {
            if (await releaseJob(tx.db, job.id, instanceId)) await tx.publish({ type: 'job_enqueued', agentId: job.agent_id });
          });
          return 'requeued';
        }
        finisher = handler.failure(job, error);
      }
    }
    try {
      return await this.writeOutcomeWhenTheStoreAnswers(job, finisher, signal);
    } catch (error) {
      // Lease lost: another runner took the job over and writes its result.
      if (error instanceof LeaseLost) return 'requeued';
      // Shutting down while the store was away: the outcome is not written, and the lease
      // brings the job back at the next start (or to another instance).
      if (isStoreUnavailable(error)) return 'requeued';
      // The outcome could not be written (its session is gone, say): record the failure
      // instead, and failing even that, close the job with no turn rather than retry forever.
      // If the database itself is away, this fails too and the lease brings the job back.
      this.shared.report(error, `finishing job ${job.id}`);
      try {
        return (await this.writeOutcome(job, handler.failure(job, error))).status;
      } catch {
        return (await this.writeOutcome(job, async () => ({ status: 'failed', replyTurnId: null }))).status;
      }
    }
  }

  /**
   * writeOutcome(), tried again while the store cannot be reached (a full disk, a database
   * restarting): a turn that ended is not run again, nor recorded as failed, for want of a write.
   * The job stays this runner's meanwhile, its lease renewed once the store is back; the tries end
   * when the lease is found lost (another runner took it over), or at shutdown (the job is then
   * released by its lease). Any other error is the outcome's own, for the caller.
   */
  private async writeOutcomeWhenTheStoreAnswers(job: Job, finisher: Finisher, signal: AbortSignal): Promise<'done' | 'failed'> {
    const giveUpAt = Date.now() + FINISH_RETRY_FOR_MS;
    for (let pauseMs = FINISH_RETRY_FIRST_MS; ; pauseMs = Math.min(pauseMs * 2, FINISH_RETRY_MAX_MS)) {
      try {
        return (await this.writeOutcome(job, finisher)).status;
      } catch (error) {
        if (!isStoreUnavailable(error) || this.shared.runner.stopping || signal.aborted || Date.now() > giveUpAt) throw error;
        this.shared.report(error, `writing the outcome of job ${job.id} (tried again in ${pauseMs} ms)`);
        await setTimeoutPromise(pauseMs, undefined, { signal }).catch(() => {}); // a lease lost ends the pause
        if (signal.aborted) throw error;
      }
    }
  }

  /** Writes a job's outcome and marks it finished, if this runner still holds its lease. */
  private writeOutcome(job: Job, finisher: Finisher) {
    return this.shared.transact(async (tx) => {
      const outcome = await finisher(tx);
      const finishedAt = this.shared.now();
      const held = await finishJob(tx.db, job.id, this.shared.settings.instanceId, outcome.status, outcome.replyTurnId, finishedAt);
      if (!held) throw new LeaseLost();
      await tx.publish({ type: 'job_done', jobId: job.id });
      // Waiters on this instance get the outcome at once (no re-read); others re-read it.
      tx.afterCommit(() => this.waiting.wake(job.id, {
        job: { ...job, status: outcome.status, reply_turn_id: outcome.replyTurnId, lease_owner: null, lease_expires_at: null, finished_at: new Date(finishedAt).toISOString() },
        ...(outcome.reply ? { reply: outcome.reply } : {}),
      }));
      return outcome;
    });
  }

  /** Lets the jobs running here finish within `graceMs`; then aborts the rest (they give their jobs back) and waits a little for them. */
  async stopRuns(graceMs: number): Promise<void> {
    const { slots } = this.shared;
    let graceTimer: NodeJS.Timeout | undefined;
    const graceOver = new Promise<'timeout'>((resolve) => { graceTimer = setTimeout(() => resolve('timeout'), graceMs); });
    const outcome = await Promise.race([slots.allSettled().then(() => 'done' as const), graceOver]);
    clearTimeout(graceTimer);
    if (outcome === 'timeout') {
      slots.abortAll();
      await Promise.race([slots.allSettled(), new Promise((resolve) => setTimeout(resolve, STOP_AFTER_ABORT_MS).unref())]);
    }
  }
}

/**
 * For the observers: how long the job waited in line (first runs only), and whether this run
 * takes up one that was cut off (a crash, a lost lease, a shutdown). started_at is the job's
 * first run's; this run's claim is when its lease began.
 */
function howTheRunStarts(job: Job, leaseMs: number): { waitedMs: number | null; resumed: boolean } {
  const claimedAt = Date.parse(job.lease_expires_at ?? '') - leaseMs;
  const firstRunAt = Date.parse(job.started_at ?? '');
  const resumed = firstRunAt < claimedAt;
  const waitedMs = resumed || Number.isNaN(firstRunAt) ? null : Math.max(0, firstRunAt - Date.parse(job.created_at));
  return { waitedMs, resumed };
}
