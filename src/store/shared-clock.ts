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

/** The shared clock's now as an RFC 3339 UTC string, as the tables keep times. */
export const isoNowOf = (clock: SharedClock): string => new Date(clock.now()).toISOString();

/** How many of the latest offset measurements are kept, to know how quick a quick one is. */
const SAMPLES_KEPT = 5;

/** A connection to the database server in hand: its clock can be read over it, then it is given back. */
export interface ServerClockConnection {
  readMs(): Promise<number>;
  release(): void;
}

/**
 * This machine's clock, corrected by its offset from the database server's, measured over a
 * round trip on a connection already in hand: the server's reading is taken as made halfway
 * through it, so the error is at most half the round trip. A measurement is used when its round
 * trip was quick (at most twice the quickest of the latest few, plus 5 ms), or when the offset in
 * use lies outside its error, however slow it was: this machine's clock has been stepped, and a
 * busy server must not keep the old offset for minutes.
 */
export class DatabaseAnchoredClock implements SharedClock {
  private readonly connect: () => Promise<ServerClockConnection>;
  private readonly systemNow: () => number;
  private samples: Array<{ roundTripMs: number; offsetMs: number }> = [];
  private offsetMs = 0;

  constructor(connect: () => Promise<ServerClockConnection>, systemNow: () => number = Date.now) {
    this.connect = connect;
    this.systemNow = systemNow;
  }

  now(): number {
    return this.systemNow() + this.offsetMs;
  }

  /** Measures the offset once more (at open, then periodically: clocks drift, and get stepped). */
  async sync(): Promise<void> {
    const connection = await this.connect(); // waiting for a connection is not part of the round trip
    let sample;
    try {
      const sent = this.systemNow();
      const serverMs = await connection.readMs();
      const received = this.systemNow();
      sample = { roundTripMs: received - sent, offsetMs: serverMs - (sent + received) / 2 };
    } finally {
      connection.release();
    }
    const first = this.samples.length === 0;
    this.samples = [...this.samples, sample].slice(-SAMPLES_KEPT);
    const quickest = Math.min(...this.samples.map((kept) => kept.roundTripMs));
    const quick = sample.roundTripMs <= 2 * quickest + 5;
    const contradicts = Math.abs(sample.offsetMs - this.offsetMs) > sample.roundTripMs / 2;
    if (first || quick || contradicts) this.offsetMs = sample.offsetMs;
  }
}
