/** A job running on this runner: how to stop it, and when it has let go of it. */
export interface LocalRun {
  controller: AbortController;
  settled: Promise<void>;
}

/**
 * This runner's `concurrency` slots: held by the jobs it runs, and by jobs claimed inside a
 * transaction that has not committed yet (reserved, so that concurrent enqueues never promise
 * one slot twice).
 */
export class Slots {
  private readonly runs = new Map<number, LocalRun>();
  private reserved = 0;
  private readonly concurrency: number;

  constructor(concurrency: number) {
    this.concurrency = concurrency;
  }

  get free(): number {
    return this.concurrency - this.runs.size - this.reserved;
  }

  /** Jobs running here now. */
  get running(): number {
    return this.runs.size;
  }

  reserve(): void {
    this.reserved++;
  }

  /** The claim the slot was reserved for was not made, was rolled back, or now runs (and holds a slot of its own). */
  cancelReservation(): void {
    this.reserved--;
  }

  occupy(jobId: number, run: LocalRun): void {
    this.runs.set(jobId, run);
  }

  vacate(jobId: number): void {
    this.runs.delete(jobId);
  }

  isRunning(jobId: number): boolean {
    return this.runs.has(jobId);
  }

  runningIds(): number[] {
    return [...this.runs.keys()];
  }

  /** Asks the job's run to stop (its work is not this runner's any more, or the runner is stopping). */
  abort(jobId: number): void {
    this.runs.get(jobId)?.controller.abort();
  }

  abortAll(): void {
    for (const run of this.runs.values()) run.controller.abort();
  }

  /** Resolves once every job running now has let go of its slot. */
  async allSettled(): Promise<void> {
    await Promise.all([...this.runs.values()].map((run) => run.settled));
  }
}
