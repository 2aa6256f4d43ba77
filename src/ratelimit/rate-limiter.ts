/**
 * The RateLimiter port. A sliding log: a request is accepted when fewer than L requests were
 * accepted in the 60 seconds before it, so a burst of L passes and no rolling minute ever
 * holds more than L. Refused requests use up nothing.
 *
 * Implementations may err only towards refusing (e.g. by counting an acceptance until the whole
 * time bucket it was filed in has left the window), never towards accepting.
 */
export interface RateDecision {
  allowed: boolean;
  limit: number;
  /** Requests still accepted right now. */
  remaining: number;
  /** Seconds until a request is next sure to be accepted (0 when one would be now). */
  resetSeconds: number;
}

export interface RateLimiter {
  /** Counts one request if it is accepted. */
  take(keyId: string, limit: number): Promise<RateDecision>;
  /** Resolves when the store that counts answers, rejects when it cannot be reached (for /readyz). */
  ping(): Promise<void>;
  close(): Promise<void>;
}

export const WINDOW_MS = 60_000;

/**
 * A decision from what the log says after this request: `usedInWindow` acceptances still count,
 * and at `freeAtMs` enough of them will have left the window for a request to be accepted
 * (null when one would be accepted now).
 */
export function decision(allowed: boolean, limit: number, usedInWindow: number, freeAtMs: number | null, nowMs: number): RateDecision {
  const remaining = Math.max(0, limit - usedInWindow);
  const resetSeconds = remaining > 0 || freeAtMs === null ? 0 : Math.max(1, Math.ceil((freeAtMs - nowMs) / 1000));
  return { allowed, limit, remaining, resetSeconds };
}
