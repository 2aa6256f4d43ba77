import { decision, WINDOW_MS, type RateDecision, type RateLimiter } from './rate-limiter.ts';

/**
 * One process, exact: per key a ring of the last L acceptance times. A request is accepted
 * when the oldest of those is at least a window old (or the ring is not yet full).
 */
export class MemoryRateLimiter implements RateLimiter {
  private readonly logs = new Map<string, { times: Float64Array; next: number; count: number }>();
  private readonly now: () => number;
  private lastSweep = 0;

  constructor(now: () => number = () => performance.timeOrigin + performance.now()) {
    this.now = now;
  }

  async take(keyId: string, limit: number): Promise<RateDecision> {
    return this.takeSync(keyId, limit);
  }

  takeSync(keyId: string, limit: number): RateDecision {
    const now = this.now();
    this.sweep(now);
    let log = this.logs.get(keyId);
    if (!log || log.times.length !== limit) {
      log = resize(log, limit);
      this.logs.set(keyId, log);
    }
    const windowStart = now - WINDOW_MS;
    // Entries are in acceptance order; the oldest sits at `next` once the ring is full.
    const oldestIndex = log.count < limit ? 0 : log.next;
    const oldest = log.count === 0 ? null : log.times[oldestIndex]!;
    const full = log.count >= limit;
    if (full && oldest !== null && oldest > windowStart) {
      return decision(false, limit, limit, oldest, now);
    }
    log.times[log.next] = now;
    log.next = (log.next + 1) % limit;
    log.count = Math.min(limit, log.count + 1);
    const used = countSince(log, windowStart);
    const newOldest = log.times[log.count < limit ? 0 : log.next]!;
    return decision(true, limit, used, newOldest, now);
  }

  async close(): Promise<void> {
    this.logs.clear();
  }

  /** Forget keys idle for a whole window, so memory follows active keys only. */
  private sweep(now: number): void {
    if (now - this.lastSweep < WINDOW_MS) return;
    this.lastSweep = now;
    for (const [keyId, log] of this.logs) {
      const newest = log.times[(log.next - 1 + log.times.length) % log.times.length]!;
      if (newest <= now - WINDOW_MS) this.logs.delete(keyId);
    }
  }
}

/** How many accepted times are newer than `since` (binary search over the ordered ring). */
function countSince(log: { times: Float64Array; next: number; count: number }, since: number): number {
  const size = log.times.length;
  const start = log.count < size ? 0 : log.next;
  let lo = 0;
  let hi = log.count;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (log.times[(start + mid) % size]! > since) hi = mid;
    else lo = mid + 1;
  }
  return log.count - lo;
}

/** A key's limit changed (rare): keep its newest acceptances, in order. */
function resize(old: { times: Float64Array; next: number; count: number } | undefined, limit: number) {
  const times = new Float64Array(limit);
  if (!old) return { times, next: 0, count: 0 };
  const size = old.times.length;
  const start = old.count < size ? 0 : old.next;
  const keep = Math.min(old.count, limit);
  for (let i = 0; i < keep; i++) times[i] = old.times[(start + old.count - keep + i) % size]!;
  return { times, next: keep % limit, count: keep };
}
