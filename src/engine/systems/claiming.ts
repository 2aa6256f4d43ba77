import type { Job } from '../../store/schema.ts';
import { claimInTransaction, findClaimable, hasQueuedJobs, insertJob, lockAgentLine, type NewJob } from '../queue-sql.ts';
import type { UnitOfWork } from '../unit-of-work.ts';
import type { RunObservers } from './observers.ts';
import type { EngineResources } from './resources.ts';
import type { RunningSystem } from './running.ts';

/**
 * Claims work for this runner's free slots: a job as it is enqueued, when its agent's line has
 * room, and otherwise queued jobs, found by a scan of the queue that runs on any sign of work
 * (an enqueue, a job's end, the poll). Scans never overlap: asked for during one, one more runs after it.
 */
export class ClaimingSystem {
  private readonly shared: EngineResources;
  private readonly running: RunningSystem;
  private readonly observers: RunObservers;
  /** The scan under way, if any, and the one asked for while it runs. */
  private scan: Promise<void> | null = null;
  private rescan: PromiseWithResolvers<void> | null = null;
  /**
   * False only after a scan found nothing queued and no sign of new work came since. A slot or a
   * line freed by a finished job matters only while work may be queued, so then no scan runs
   * for it. The poll sets it again anyway.
   */
  private queueMayHoldWork = true;

  constructor(shared: EngineResources, running: RunningSystem, observers: RunObservers) {
    this.shared = shared;
    this.running = running;
    this.observers = observers;
  }

  /**
   * Enqueues a job inside the caller's transaction. When this runner has a free slot and the
   * agent has room in its line, the job is inserted already claimed and starts the moment the
   * transaction commits (no second statement, no scan); otherwise runners are told there is work.
   */
  async enqueue(tx: UnitOfWork, job: NewJob): Promise<Job> {
    const { slots, settings, store } = this.shared;
    // Whatever fails from here on, the rollback gives back the slot this unit took, and runners
    // look again: the agent's line was held by this transaction, so a claim may have given up.
    let reservedHere = false;
    tx.onRollback(() => {
      if (reservedHere) slots.cancelReservation();
      void this.lookForWork();
    });
    // On PostgreSQL the lock goes out with the insert below: a slot reserved here may wait with it.
    await lockAgentLine(tx.db, store, job.agentId);
    if (this.canClaim()) {
      slots.reserve(); // held from here, so concurrent enqueues never promise the same slot twice
      reservedHere = true;
    } else if (this.shared.runner.takesWork) {
      const { concurrency } = settings;
      tx.afterCommit(() => this.observers.tell((observer) => observer.waitsForSlot?.({ kind: job.kind, concurrency })));
    }
    const claim = reservedHere ? { owner: settings.instanceId, leaseMs: settings.leaseMs, perAgent: settings.perAgent } : null;
    const row = await insertJob(tx.db, job, claim, this.shared.now());
    const claimed = row.status === 'running';
    if (reservedHere && !claimed) {
      slots.cancelReservation();
      reservedHere = false;
    }
    if (claimed) {
      tx.afterCommit(() => {
        slots.cancelReservation(); // the run takes a slot of its own
        this.running.launch(row);
      });
    } else {
      await tx.publish({ type: 'job_enqueued', agentId: job.agentId });
    }
    return row;
  }

  /**
   * There may be new work in the queue: scans it soon, once however often asked meanwhile.
   * Resolves once a scan begun after this call has ended (and launched what it claimed).
   */
  lookForWork(): Promise<void> {
    this.queueMayHoldWork = true;
    return this.scanSoon();
  }

  /** A job ended, here or elsewhere: its slot or its agent's line is free for queued work, if any may be queued. */
  scanIfWorkMayBeQueued(): void {
    // While a scan runs the flag is down, and the scan may have read the queue before this job
    // ended: ask for another look (folded into one rescan).
    if (this.queueMayHoldWork || this.scan) void this.scanSoon();
  }

  private canClaim(): boolean {
    return this.shared.runner.takesWork && this.shared.slots.free > 0;
  }

  private scanSoon(): Promise<void> {
    if (!this.shared.runner.takesWork) return Promise.resolve();
    // The scan under way may have read the queue before what prompted this call: one more after it.
    if (this.scan) return (this.rescan ??= Promise.withResolvers<void>()).promise;
    const scan = new Promise((resolve) => setImmediate(resolve))
      .then(() => this.claimWhileSlotsFree())
      .catch((e: unknown) => {
        this.queueMayHoldWork = true; // the scan did not finish: nothing is known
        this.shared.report(e, 'claiming work');
      })
      .finally(() => {
        this.scan = null;
        const rescan = this.rescan;
        this.rescan = null;
        if (rescan) void this.scanSoon().then(rescan.resolve);
      });
    this.scan = scan;
    return scan;
  }

  /** Scans the queue and claims the oldest startable jobs, until the slots are full or nothing more can start. */
  private async claimWhileSlotsFree(): Promise<void> {
    const { store, settings, slots } = this.shared;
    while (this.canClaim()) {
      // Cleared before the scan: work queued while it runs marks it again (and rescans).
      this.queueMayHoldWork = false;
      const candidates = await findClaimable(store.db, settings.perAgent, slots.free * 2);
      // Jobs behind a busy agent are not candidates yet, but they start when its line frees.
      if (candidates.length > 0 || (await hasQueuedJobs(store.db))) this.queueMayHoldWork = true;
      if (candidates.length === 0) return;
      let claimedAny = false;
      for (const candidate of candidates) {
        if (!this.canClaim()) return;
        // Put back in line by another instance while its run here goes on (this one's lease ran
        // out while the store was away): never a second run of it here. The heartbeat stops the
        // first, and the job is claimed afresh once that run has let go of it.
        if (slots.isRunning(candidate.id)) continue;
        const job = await this.shared.transact((tx) => claimInTransaction(tx.db, store, candidate, settings.instanceId,
          settings.leaseMs, settings.perAgent));
        if (job) {
          claimedAny = true;
          this.running.launch(job);
        }
      }
      if (!claimedAny) return;
    }
  }
}
