import { createHmac } from 'node:crypto';
import type { Transaction } from 'kysely';
import ipaddr from 'ipaddr.js';
import { randomBase62 } from '../domain/ids.ts';
import { instanceSecret } from '../store/repos/instance-secrets.ts';
import type { DB } from '../store/schema.ts';
import type { Store } from '../store/store.ts';
import { lockKeysAhead } from '../store/postgres-dialect.ts';

/**
 * The web app's log-in and sign-up throttle, counted in the store, so that every instance of one
 * deployment shares one count (in memory, each instance gave an attacker the budget again).
 *
 * Log-in: an attempt counts against its account (email) and its client IP *when it starts*, so
 * parallel requests cannot all slip in before the first failure is recorded (the password check
 * takes a whole scrypt hash): the count and the new attempt are one transaction, and on
 * PostgreSQL the keys it counts are locked for it. A successful log-in forgives its own attempt
 * and clears the account's count. Sign-up: every attempt counts against its IP, success or not,
 * because each one costs a full scrypt hash (~128 MiB, ~0.4 s at the default cost).
 *
 * A refused attempt is not written, so a flood costs no rows; what is written leaves within a
 * minute of falling out of its window (the housekeeping's sweep).
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
  /** The attempt's own id: `succeeded` forgives this attempt, not another of the same client's. */
  id: string;
}


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

interface Budget {
  key: string;
  limit: number;
  windowMs: number;
}

export class LoginThrottle {
  private readonly store: Store;
  private readonly options: ThrottleOptions;
  private keying: Promise<Buffer> | undefined;

  constructor(store: Store, options: Partial<ThrottleOptions> = {}) {
    this.store = store;
    this.options = { ...DEFAULT_THROTTLE, ...options };
  }

  /**
   * What is counted, as a key of fixed size: a client may send an email (or, through a proxy it
   * is trusted on, an address) of any length, and none of it needs keeping. Keyed with a secret of
   * the deployment (an HMAC), so that a copy of the table does not give back, by trying every
   * IPv4 address or a list of emails, who tried to log in from where.
   */
  async keyOf(kind: 'a' | 'i' | 's', value: string): Promise<string> {
    this.keying ??= instanceSecret(this.store.db, 'web.login-throttle-key').catch((error: unknown) => {
      this.keying = undefined; // the database was away: ask again next time
      throw error;
    });
    return `${kind}:${createHmac('sha256', await this.keying).update(value).digest('base64url')}`;
  }

  /**
   * Starts a log-in attempt: `{ retryAfter }` (seconds) when it may not go ahead, else the
   * attempt, already counted against the account and the IP.
   */
  async beginLogin(email: string, ip: string, now = this.store.clock.now()): Promise<{ retryAfter: number } | { attempt: LoginAttempt }> {
    const { perAccount, perIp, windowMs } = this.options;
    const id = randomBase62(16);
    const wait = await this.take([
      { key: await this.keyOf('a', email), limit: perAccount, windowMs },
      { key: await this.keyOf('i', clientOf(ip)), limit: perIp, windowMs },
    ], id, now);
    return wait > 0 ? { retryAfter: wait } : { attempt: { email, ip, id } };
  }

  /** The password was right: this attempt is forgiven, and so are the account's earlier failures. */
  async succeeded(attempt: LoginAttempt): Promise<void> {
    const [account, address] = [await this.keyOf('a', attempt.email), await this.keyOf('i', clientOf(attempt.ip))];
    // Both by key, so that the index on (key, at) finds the rows: by `attempt` alone, each log-in
    // read the whole table, which anyone can fill (30 rows a window per address, or per IPv6 /64).
    await this.store.db.deleteFrom('login_attempts')
      .where((eb) => eb.or([
        eb('key', '=', account),
        eb.and([eb('key', '=', address), eb('attempt', '=', attempt.id)]),
      ]))
      .execute();
  }

  /**
   * What forgets the account's failed log-ins, in the transaction that sets its password anew
   * (so that it may log in at once, and a failure part-way changes nothing). The key is made
   * here, before that transaction: making it may read (or write) the deployment's secret.
   */
  async accountForgiver(email: string): Promise<(trx: Transaction<DB>) => Promise<void>> {
    const key = await this.keyOf('a', email.trim().toLowerCase()); // as a log-in keys it
    return async (trx) => {
      await trx.deleteFrom('login_attempts').where('key', '=', key).execute();
    };
  }

  /** Starts a sign-up: 0 when it may go ahead (and it is counted), else the seconds to wait. */
  async beginSignup(ip: string, now = this.store.clock.now()): Promise<number> {
    const { signupPerIp, signupWindowMs } = this.options;
    return this.take([{ key: await this.keyOf('s', clientOf(ip)), limit: signupPerIp, windowMs: signupWindowMs }], randomBase62(16), now);
  }

  /**
   * Counts an attempt against every budget, or none of them: 0 when it went ahead, else the
   * seconds until the fullest budget has room again.
   */
  private async take(budgets: Budget[], id: string, at: number): Promise<number> {
    const now = Math.floor(at); // stored to the millisecond (the store's clock may give a fraction)
    return this.store.db.transaction().execute(async (trx) => {
      await lockKeys(trx, this.store.dialect, budgets.map((b) => b.key));
      let wait = 0;
      for (const budget of budgets) wait = Math.max(wait, await waitFor(trx, budget, now));
      if (wait > 0) return wait;
      await trx.insertInto('login_attempts').values(budgets.map((b) => ({ key: b.key, attempt: id, at: now }))).execute();
      return 0;
    });
  }

  /** Deletes the attempts that are out of every window (housekeeping, every minute; by the index on `at`). */
  async sweep(at = this.store.clock.now()): Promise<number> {
    const now = Math.floor(at);
    const longest = Math.max(this.options.windowMs, this.options.signupWindowMs);
    const result = await this.store.db.deleteFrom('login_attempts').where('at', '<=', now - longest).executeTakeFirst();
    return Number(result.numDeletedRows);
  }
}

/**
 * On PostgreSQL, two instances counting the same account at once would both find room: each
 * transaction first takes a lock per key (advisory, released at its end), in one order so that
 * two never wait on each other. SQLite runs one write transaction at a time anyway.
 */
async function lockKeys(trx: Transaction<DB>, dialect: Store['dialect'], keys: string[]): Promise<void> {
  if (dialect === 'postgres') await lockKeysAhead(trx, keys);
}

/** Seconds until this budget has room again (0: it has room now). */
async function waitFor(trx: Transaction<DB>, budget: Budget, now: number): Promise<number> {
  // The newest `limit` attempts in the window: with fewer there is room; else the oldest of them
  // must leave the window first.
  const recent = await trx.selectFrom('login_attempts').select('at')
    .where('key', '=', budget.key).where('at', '>', now - budget.windowMs)
    .orderBy('at', 'desc').limit(budget.limit).execute();
  if (recent.length < budget.limit) return 0;
  const oldestThatCounts = Number(recent[recent.length - 1]!.at);
  return Math.max(1, Math.ceil((oldestThatCounts + budget.windowMs - now) / 1000));
}
