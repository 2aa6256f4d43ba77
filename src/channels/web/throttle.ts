/**
 * Login throttle: failed attempts counted per account (email) and per client IP in a rolling
 * window. In memory, per instance: with several instances an attacker gets at most
 * (instances × limit) tries per window, which is still slow against scrypt-hashed passwords.
 */
export interface ThrottleOptions {
  perAccount: number;
  perIp: number;
  windowMs: number;
}

export const DEFAULT_THROTTLE: ThrottleOptions = { perAccount: 5, perIp: 30, windowMs: 15 * 60_000 };

export class LoginThrottle {
  private readonly failures = new Map<string, number[]>();
  private readonly options: ThrottleOptions;

  constructor(options: ThrottleOptions = DEFAULT_THROTTLE) {
    this.options = options;
  }

  /** 0 when an attempt may go ahead, else the seconds until it may. */
  retryAfter(email: string, ip: string, now = Date.now()): number {
    const account = this.waitFor(`a:${email}`, this.options.perAccount, now);
    const address = this.waitFor(`i:${ip}`, this.options.perIp, now);
    return Math.max(account, address);
  }

  fail(email: string, ip: string, now = Date.now()): void {
    for (const key of [`a:${email}`, `i:${ip}`]) {
      const list = this.recent(key, now);
      list.push(now);
      this.failures.set(key, list);
    }
    if (this.failures.size > 100_000) this.prune(now);
  }

  /** A successful login clears the account's failures (not the IP's). */
  succeed(email: string): void {
    this.failures.delete(`a:${email}`);
  }

  private recent(key: string, now: number): number[] {
    return (this.failures.get(key) ?? []).filter((at) => now - at < this.options.windowMs);
  }

  private waitFor(key: string, limit: number, now: number): number {
    const list = this.recent(key, now);
    if (list.length === 0) this.failures.delete(key);
    if (list.length < limit) return 0;
    const oldestThatCounts = list[list.length - limit] ?? now;
    return Math.max(1, Math.ceil((oldestThatCounts + this.options.windowMs - now) / 1000));
  }

  private prune(now: number): void {
    for (const key of [...this.failures.keys()]) {
      if (this.recent(key, now).length === 0) this.failures.delete(key);
    }
  }
}
