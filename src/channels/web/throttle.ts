/**
 * Log-in and sign-up throttle, in memory, per instance: with several instances an attacker gets
 * at most (instances × limit) tries per window, which is still slow against scrypt.
 *
 * Log-in: an attempt counts against its account (email) and its client IP *when it starts*, so
 * parallel requests cannot all slip in before the first failure is recorded (the password check
 * takes a whole scrypt hash); a successful log-in forgives its own attempt and clears the
 * account's count. Sign-up: every attempt counts against its IP, success or not, because each
 * one costs a full scrypt hash (~128 MiB, ~0.4 s at the default cost).
 */
export interface ThrottleOptions {
  perAccount: number;
  perIp: number;
  windowMs: number;
  signupPerIp: number;
  signupWindowMs: number;
}

export const DEFAULT_THROTTLE: ThrottleOptions = {
  perAccount: 5, perIp: 30, windowMs: 15 * 60_000,
  signupPerIp: 10, signupWindowMs: 15 * 60_000,
};

/** A log-in attempt that was let through; hand it back to `succeeded` when the password was right. */
export interface LoginAttempt {
  email: string;
  ip: string;
  at: number;
}

export class LoginThrottle {
  private readonly attempts = new Map<string, number[]>();
  private readonly options: ThrottleOptions;

  constructor(options: Partial<ThrottleOptions> = {}) {
    this.options = { ...DEFAULT_THROTTLE, ...options };
  }

  /**
   * Starts a log-in attempt: `{ retryAfter }` (seconds) when it may not go ahead, else the
   * attempt, already counted against the account and the IP.
   */
  beginLogin(email: string, ip: string, now = Date.now()): { retryAfter: number } | { attempt: LoginAttempt } {
    const { perAccount, perIp, windowMs } = this.options;
    const wait = Math.max(this.waitFor(`a:${email}`, perAccount, windowMs, now), this.waitFor(`i:${ip}`, perIp, windowMs, now));
    if (wait > 0) return { retryAfter: wait };
    this.record(`a:${email}`, now, windowMs);
    this.record(`i:${ip}`, now, windowMs);
    return { attempt: { email, ip, at: now } };
  }

  /** The password was right: this attempt is forgiven, and so are the account's earlier failures. */
  succeeded(attempt: LoginAttempt): void {
    this.attempts.delete(`a:${attempt.email}`);
    const list = this.attempts.get(`i:${attempt.ip}`);
    const index = list ? list.indexOf(attempt.at) : -1;
    if (list && index >= 0) list.splice(index, 1);
  }

  /** Starts a sign-up: 0 when it may go ahead (and it is counted), else the seconds to wait. */
  beginSignup(ip: string, now = Date.now()): number {
    const { signupPerIp, signupWindowMs } = this.options;
    const wait = this.waitFor(`s:${ip}`, signupPerIp, signupWindowMs, now);
    if (wait === 0) this.record(`s:${ip}`, now, signupWindowMs);
    return wait;
  }

  private record(key: string, now: number, windowMs: number): void {
    const list = this.recent(key, now, windowMs);
    list.push(now);
    this.attempts.set(key, list);
    if (this.attempts.size > 100_000) this.prune(now);
  }

  private recent(key: string, now: number, windowMs: number): number[] {
    return (this.attempts.get(key) ?? []).filter((at) => now - at < windowMs);
  }

  private waitFor(key: string, limit: number, windowMs: number, now: number): number {
    const list = this.recent(key, now, windowMs);
    if (list.length === 0) this.attempts.delete(key);
    if (list.length < limit) return 0;
    const oldestThatCounts = list[list.length - limit] ?? now;
    return Math.max(1, Math.ceil((oldestThatCounts + windowMs - now) / 1000));
  }

  private prune(now: number): void {
    const longest = Math.max(this.options.windowMs, this.options.signupWindowMs);
    for (const key of [...this.attempts.keys()]) {
      if (this.recent(key, now, longest).length === 0) this.attempts.delete(key);
    }
  }
}
