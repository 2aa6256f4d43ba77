/**
 * The RateLimiter port. A sliding log: a request is accepted when fewer than L requests were
 * accepted in the 60 seconds before it, so a burst of L passes and no rolling minute ever
 * holds more than L. Refused requests use up nothing.
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
  take(keyId: string, limit: number): Promise<RateDecision>;
  close(): Promise<void>;
}

export const WINDOW_MS = 60_000;

export function decision(allowed: boolean, limit: number, usedInWindow: number, oldestAcceptedMs: number | null, nowMs: number): RateDecision {
  const remaining = Math.max(0, limit - usedInWindow);
  const resetSeconds = remaining > 0 || oldestAcceptedMs === null ? 0 : Math.max(1, Math.ceil((oldestAcceptedMs + WINDOW_MS - nowMs) / 1000));
  return { allowed, limit, remaining, resetSeconds };
}
