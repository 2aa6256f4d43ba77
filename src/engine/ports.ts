import type { Job, JobKind } from '../store/schema.ts';
import type { UnitOfWork } from './unit-of-work.ts';

// The engine's ports: what it asks of the services above it, and what it hands back to them.

/** The work itself (brain calls and their results) lives above the engine, in services. */
export interface JobHandler {
  /** Does the work. Must stop promptly (throwing) when `signal` aborts. */
  run(job: Job, signal: AbortSignal): Promise<Finisher>;
  /** What to record when run() threw, or the job kept crashing its runner. */
  failure(job: Job, error: unknown): Finisher;
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

/** The turn a finished job wrote, handed straight to waiters on this instance (no re-read). */
export interface ReplyTurn {
  text: string;
  ts: string;
}

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
  /** A job was accepted while every one of this runner's `concurrency` slots was busy: it waits in line for one. */
  waitsForSlot?(run: { kind: JobKind; concurrency: number }): void;
}

export const isFinished = (job: Pick<Job, 'status'>): boolean => job.status === 'done' || job.status === 'failed';
