/**
 * The time that every instance sharing a store agrees on, in milliseconds since the epoch.
 *
 * Instances compare times that other instances wrote: a job's lease, the duplicate window, an
 * idempotency record's age. Read off each machine's own clock, an instance running a minute
 * ahead found the others' healthy turns expired and ran them again (twice at once), and one
 * running behind took a crashed instance's turns over a minute late. On PostgreSQL the database
 * server's clock is the reference: each instance keeps its own clock's offset from it. On SQLite
 * every process is on one machine, whose clock is the reference.
 */
export interface SharedClock {
  now(): number;
}

export const systemClock: SharedClock = { now: () => Date.now() };

/** How many of the latest offset measurements are weighed against each other. */
const SAMPLES_KEPT = 5;

/**
 * This machine's clock, corrected by its offset from the database server's, measured over a
 * round trip: the server's reading is taken as made halfway through it, so the error is at most
 * half the round trip. The newest measurement is used unless its round trip was much longer than
 * the shortest of the latest few (a busy moment), in which case the newest of the quick ones is.
 */
export class DatabaseAnchoredClock implements SharedClock {
  private readonly readServerMs: () => Promise<number>;
  private readonly systemNow: () => number;
  private samples: Array<{ roundTripMs: number; offsetMs: number }> = [];
  private offsetMs = 0;

  constructor(readServerMs: () => Promise<number>, systemNow: () => number = Date.now) {
    this.readServerMs = readServerMs;
    this.systemNow = systemNow;
  }

  now(): number {
    return this.systemNow() + this.offsetMs;
  }

  /** Measures the offset once more (at open, then periodically: clocks drift, and get stepped). */
  async sync(): Promise<void> {
    const sent = this.systemNow();
    const serverMs = await this.readServerMs();
    const received = this.systemNow();
    this.samples = [...this.samples, { roundTripMs: received - sent, offsetMs: serverMs - (sent + received) / 2 }].slice(-SAMPLES_KEPT);
    const quickest = Math.min(...this.samples.map((sample) => sample.roundTripMs));
    this.offsetMs = this.samples.findLast((sample) => sample.roundTripMs <= 2 * quickest + 5)!.offsetMs;
  }
}
