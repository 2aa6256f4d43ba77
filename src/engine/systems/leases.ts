import { renewLeases, requeueAllRunning, requeueExpired } from '../queue-sql.ts';
import type { EngineResources } from './resources.ts';

/**
 * The leases by which a job is one runner's: this runner renews its own (a heartbeat), and puts
 * back in line the jobs whose runner stopped renewing them (it died), so that their work resumes.
 */
export class LeaseSystem {
  private readonly shared: EngineResources;

  constructor(shared: EngineResources) {
    this.shared = shared;
  }

  /** How often this runner renews its leases, and looks for expired ones. */
  get renewEveryMs(): number {
    return Math.max(200, Math.floor(this.shared.settings.leaseMs / 3));
  }

  get takeOverEveryMs(): number {
    return Math.max(200, Math.floor(this.shared.settings.leaseMs / 2));
  }

  /** At start: gives back to the queue the work a crash cut off. */
  async recoverInterruptedWork(): Promise<void> {
    const { db, dialect } = this.shared.store;
    // One SQLite file has one server: anything "running" there was cut off by a crash.
    // On PostgreSQL other instances may be alive, so only expired leases are taken over.
    if (dialect === 'sqlite') await requeueAllRunning(db);
    else await requeueExpired(db, this.shared.now());
  }

  /**
   * Renews the leases of the jobs running here. A job whose lease is gone (the store was away
   * for longer than a lease, and another instance took the job over) is stopped here: its work
   * is the other runner's now, and its outcome could not be written by this one anyway.
   */
  async renewOwnLeases(): Promise<void> {
    const { store, settings, slots } = this.shared;
    const ids = slots.runningIds();
    const renewed = new Set(await renewLeases(store.db, settings.instanceId, ids, settings.leaseMs, this.shared.now()));
    for (const id of ids) if (!renewed.has(id)) slots.abort(id);
  }

  /** Puts the jobs whose lease has expired back in line, announced like new work so that every instance (not only this one) looks for them. */
  async takeOverExpiredLeases(): Promise<void> {
    // Own leases first: after the store was away for longer than a lease, this instance's own
    // running jobs look expired too, and must not be put back in line (and run again) here.
    await this.renewOwnLeases();
    await this.shared.transact(async (tx) => {
      for (const agentId of await requeueExpired(tx.db, this.shared.now())) await tx.publish({ type: 'job_enqueued', agentId });
    });
  }
}
