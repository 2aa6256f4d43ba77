import { hash } from 'node:crypto';
import ipaddr from 'ipaddr.js';

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
  /**
   * The most accounts and IPs counted at once, below their limit (and again as many at it).
   * Past it the one counted least recently is forgotten, so a flood of made-up emails or
   * addresses costs bounded memory and no scan; a locked one is never forgotten for a new one.
   */
  maxKeys: number;
}

export const DEFAULT_THROTTLE: ThrottleOptions = {
  perAccount: 5, perIp: 30, windowMs: 15 * 60_000,
  signupPerIp: 10, signupWindowMs: 15 * 60_000,
  maxKeys: 100_000,
};

/** Keys that have counted nothing for a whole window are dropped at most this often (one pass). */
const SWEEP_EVERY_MS = 60_000;

/** A log-in attempt that was let through; hand it back to `succeeded` when the password was right. */
export interface LoginAttempt {
  email: string;
  ip: string;
  at: number;
}

/**
 * What is counted, as a key of fixed size: a client may send an email (or, through a proxy it
 * is trusted on, an address) of any length, and none of it needs keeping.
 */
export const keyOf = (kind: 'a' | 'i' | 's', value: string): string => `${kind}:${hash('sha256', value, 'base64url')}`;

/**
 * What a per-IP limit counts as one client: an IPv4 address, or the /64 an IPv6 address lies in
 * (one subscriber's usual allocation: counted address by address, a single client would have
 * 2^64 budgets). An IPv4-mapped IPv6 address is its IPv4 address; anything else, as it is.
 */
export function clientOf(ip: string): string {
  let address: ipaddr.IPv4 | ipaddr.IPv6;
  try {
    address = ipaddr.process(ip); // a zone dropped, an IPv4-mapped address made IPv4
  } catch {
    return ip;
  }
  if (address.kind() === 'ipv4') return address.toString();
  return `${(address as ipaddr.IPv6).parts.slice(0, 4).map((group) => group.toString(16)).join(':')}::/64`;
}

export class LoginThrottle {
  // Accounts and addresses still under their limit, least recently counted first (a key moves
  // to the end each time it counts): past maxKeys the first is forgotten.
  private readonly counting = new Map<string, number[]>();
  // Those at their limit. Apart, because a blocked attempt is not counted, so such a key would
  // drift to the front of `counting` and a flood of new keys could evict it: a lock lifted early.
  // Capped too; reaching it takes maxKeys locked accounts or addresses.
  private readonly blocked = new Map<string, number[]>();
  private readonly options: ThrottleOptions;
  private lastSweep = 0;

  constructor(options: Partial<ThrottleOptions> = {}) {
    this.options = { ...DEFAULT_THROTTLE, ...options };
  }

  /** How many accounts and IPs are being counted now (tests and diagnostics). */
  get keysHeld(): number {
    return this.counting.size + this.blocked.size;
  }

  /**
   * Starts a log-in attempt: `{ retryAfter }` (seconds) when it may not go ahead, else the
   * attempt, already counted against the account and the IP.
   */
  beginLogin(email: string, ip: string, now = Date.now()): { retryAfter: number } | { attempt: LoginAttempt } {
    const { perAccount, perIp, windowMs } = this.options;
    const account = keyOf('a', email);
    const address = keyOf('i', clientOf(ip));
    const wait = Math.max(this.waitFor(account, perAccount, windowMs, now), this.waitFor(address, perIp, windowMs, now));
    if (wait > 0) return { retryAfter: wait };
    this.record(account, perAccount, now, windowMs);
    this.record(address, perIp, now, windowMs);
    return { attempt: { email, ip, at: now } };
  }

  /** The password was right: this attempt is forgiven, and so are the account's earlier failures. */
  succeeded(attempt: LoginAttempt): void {
    const account = keyOf('a', attempt.email);
    this.counting.delete(account);
    this.blocked.delete(account);
    const list = this.listOf(keyOf('i', clientOf(attempt.ip)));
    const index = list ? list.indexOf(attempt.at) : -1;
    if (list && index >= 0) list.splice(index, 1);
  }

  /** Starts a sign-up: 0 when it may go ahead (and it is counted), else the seconds to wait. */
  beginSignup(ip: string, now = Date.now()): number {
    const { signupPerIp, signupWindowMs } = this.options;
    const key = keyOf('s', clientOf(ip));
    const wait = this.waitFor(key, signupPerIp, signupWindowMs, now);
    if (wait === 0) this.record(key, signupPerIp, now, signupWindowMs);
    return wait;
  }

  private listOf(key: string): number[] | undefined {
    return this.blocked.get(key) ?? this.counting.get(key);
  }

  private forget(key: string): void {
    this.counting.delete(key);
    this.blocked.delete(key);
  }

  private record(key: string, limit: number, now: number, windowMs: number): void {
    const list = this.recent(key, now, windowMs);
    list.push(now);
    this.forget(key);
    (list.length >= limit ? this.blocked : this.counting).set(key, list);
    this.sweep(now);
    for (const map of [this.counting, this.blocked]) {
      while (map.size > this.options.maxKeys) map.delete(map.keys().next().value!);
    }
  }

  private recent(key: string, now: number, windowMs: number): number[] {
    return (this.listOf(key) ?? []).filter((at) => now - at < windowMs);
  }

  private waitFor(key: string, limit: number, windowMs: number, now: number): number {
    const list = this.recent(key, now, windowMs);
    if (list.length === 0) this.forget(key);
    if (list.length < limit) return 0;
    const oldestThatCounts = list[list.length - limit] ?? now;
    return Math.max(1, Math.ceil((oldestThatCounts + windowMs - now) / 1000));
  }

  /** Forgets keys with nothing left in any window: one pass, at most once a minute. */
  private sweep(now: number): void {
    if (now - this.lastSweep < SWEEP_EVERY_MS) return;
    this.lastSweep = now;
    const longest = Math.max(this.options.windowMs, this.options.signupWindowMs);
    for (const map of [this.counting, this.blocked]) {
      for (const [key, list] of map) {
        if (list.every((at) => now - at >= longest)) map.delete(key);
      }
    }
  }
}
