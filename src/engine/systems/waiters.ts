import { isStoreUnavailable } from '../../store/unavailable.ts';
import { isFinished, type JobState, type JobWatch } from '../ports.ts';
import { finishedJobs, getJob } from '../queue-sql.ts';
import type { EngineResources } from './resources.ts';

type Wake = (state?: JobState) => void;

/**
 * Requests on this instance waiting for a job's end. A wake-up with a state (the job ended here)
 * needs no read; a bare one (it ended elsewhere, or the wait is over) reads where the job stands.
 */
export class WaitingSystem {
  private readonly shared: EngineResources;
  private readonly waiters = new Map<number, Set<Wake>>();

  constructor(shared: EngineResources) {
    this.shared = shared;
  }

  /**
   * Starts listening for a job's end now: called inside the transaction that enqueues it, no
   * wake-up can be missed, and the waiter needs no read to learn what it already knows.
   */
  watch(jobId: number): JobWatch {
    let wake!: Wake;
    const woken = new Promise<JobState | undefined>((resolve) => { wake = resolve; });
    let set = this.waiters.get(jobId);
    if (!set) this.waiters.set(jobId, (set = new Set()));
    set.add(wake);
    const waiters = set;
    const cancel = () => {
      waiters.delete(wake);
      if (waiters.size === 0 && this.waiters.get(jobId) === waiters) this.waiters.delete(jobId);
    };
    const { db } = this.shared.store;
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

  /** Wakes the job's waiters: with its outcome when this instance knows it, else bare (they read it). */
  wake(jobId: number, state?: JobState): void {
    const waiting = this.waiters.get(jobId);
    if (waiting) for (const wake of waiting) wake(state);
  }

  /** Wakes the waiters of every watched job that has finished: their wake-ups may have been lost. */
  async wakeThoseFinished(): Promise<void> {
    for (const job of await finishedJobs(this.shared.store.db, [...this.waiters.keys()])) this.wake(job.id, { job });
  }

  /** Ends every wait (shutdown): each answers with the job as it stands. */
  wakeAll(): void {
    for (const set of this.waiters.values()) for (const wake of set) wake();
  }

  /** How many waits are open now. */
  get count(): number {
    let count = 0;
    for (const set of this.waiters.values()) count += set.size;
    return count;
  }
}
