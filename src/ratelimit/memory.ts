import { decision, WINDOW_MS, type RateDecision, type RateLimiter } from './rate-limiter.ts';

/**
 * One key's log: a deque of runs, oldest first, kept in a ring of power-of-two capacity, with
 * the sum of their counts. A run holds the acceptances of one millisecond: `at` is the latest
 * of them, and all count while now < at + window. Exact on an integer clock; otherwise the
 * earlier ones of a run count less than 1 ms too long (the refusing side). Two runs never share
 * a millisecond, so a key holds at most min(L, 60,001) runs however large L is.
 */
interface Runs {
  at: Float64Array;
  count: Uint32Array;
  head: number;
  size: number;
  total: number;
}

const MIN_CAPACITY = 4;

/** One process, exact: per key a deque of (millisecond, count) runs inside the window. */
export class MemoryRateLimiter implements RateLimiter {
  private readonly logs = new Map<string, Runs>();
  private readonly now: () => number;
  private lastSweep = 0;

  constructor(now: () => number = () => performance.timeOrigin + performance.now()) {
    this.now = now;
  }

  async take(keyId: string, limit: number): Promise<RateDecision> {
    const now = this.now();
    this.sweep(now);
    let runs = this.logs.get(keyId);
    if (!runs) {
      runs = { at: new Float64Array(MIN_CAPACITY), count: new Uint32Array(MIN_CAPACITY), head: 0, size: 0, total: 0 };
      this.logs.set(keyId, runs);
    }
    dropLeft(runs, now);
    if (runs.total >= limit) return decision(false, limit, runs.total, freeAt(runs, limit), now);
    const last = (runs.head + runs.size - 1) & (runs.at.length - 1);
    // The same millisecond (or a clock that stepped back) joins the newest run, whose time only
    // ever moves later.
    if (runs.size > 0 && Math.floor(runs.at[last]!) >= Math.floor(now)) {
      runs.at[last] = Math.max(runs.at[last]!, now);
      runs.count[last]! += 1;
    } else {
      push(runs, now);
    }
    runs.total += 1;
    return decision(true, limit, runs.total, runs.total >= limit ? freeAt(runs, limit) : null, now);
  }

  /** What a key holds (tests and diagnostics): runs in its deque and the ring's capacity. */
  held(keyId: string): { runs: number; capacity: number } | null {
    const runs = this.logs.get(keyId);
    return runs ? { runs: runs.size, capacity: runs.at.length } : null;
  }

  async ping(): Promise<void> {} // in this process: always there

  async close(): Promise<void> {
    this.logs.clear();
  }

  /** Forget keys idle for a whole window, so memory follows active keys only. */
  private sweep(now: number): void {
    if (now - this.lastSweep < WINDOW_MS) return;
    this.lastSweep = now;
    for (const [keyId, runs] of this.logs) {
      const newest = runs.size === 0 ? -Infinity : runs.at[(runs.head + runs.size - 1) & (runs.at.length - 1)]!;
      if (newest + WINDOW_MS <= now) this.logs.delete(keyId);
    }
  }
}

/** Drops the runs that have wholly left the window; shrinks the ring when mostly empty. */
function dropLeft(runs: Runs, now: number): void {
  const mask = runs.at.length - 1;
  while (runs.size > 0 && runs.at[runs.head]! + WINDOW_MS <= now) {
    runs.total -= runs.count[runs.head]!;
    runs.head = (runs.head + 1) & mask;
    runs.size -= 1;
  }
  let capacity = runs.at.length;
  while (capacity > MIN_CAPACITY * 4 && runs.size * 4 <= capacity) capacity /= 2;
  if (capacity !== runs.at.length) resize(runs, capacity);
}

function push(runs: Runs, at: number): void {
  if (runs.size === runs.at.length) resize(runs, runs.at.length * 2);
  const i = (runs.head + runs.size) & (runs.at.length - 1);
  runs.at[i] = at;
  runs.count[i] = 1;
  runs.size += 1;
}

function resize(runs: Runs, capacity: number): void {
  const at = new Float64Array(capacity);
  const count = new Uint32Array(capacity);
  const mask = runs.at.length - 1;
  for (let k = 0; k < runs.size; k++) {
    at[k] = runs.at[(runs.head + k) & mask]!;
    count[k] = runs.count[(runs.head + k) & mask]!;
  }
  runs.at = at;
  runs.count = count;
  runs.head = 0;
}

/** When enough of the oldest runs will have left for the total to fall below `limit`. */
function freeAt(runs: Runs, limit: number): number | null {
  const mask = runs.at.length - 1;
  let left = runs.total;
  for (let k = 0; k < runs.size; k++) {
    const i = (runs.head + k) & mask;
    left -= runs.count[i]!;
    if (left < limit) return runs.at[i]! + WINDOW_MS;
  }
  return null;
}
