import type pg from 'pg';
import { decision, WINDOW_MS, type RateDecision, type RateLimiter } from './rate-limiter.ts';

/**
 * Every statement this limiter runs. The log itself, the table `rate_limit_windows` and the
 * function `rate_limit_take`, is created by migration 002_rate_limits.
 */
const rateLimitSql = {
  /** One round trip: lock the key's row, drop buckets that have left, decide, record. */
  take: 'select allowed, used, free_at_us, now_us from rate_limit_take($1, $2, $3, $4, $5)',
  /** Rows of keys whose every bucket has left the window (on the database's clock). */
  sweep: 'delete from rate_limit_windows where expires_us <= floor(extract(epoch from clock_timestamp()) * 1000000)',
} as const;

/** Bucket width: one bucket per second in which something was accepted, so at most 61 per key. */
export const BUCKET_MS = 1000;

export interface PostgresRateLimiterOptions {
  /** Tests only: the time in epoch ms to judge by, instead of the database's clock. */
  now?: () => number;
  /** Tests only: a bucket width other than BUCKET_MS (1 makes the log exact to the millisecond). */
  bucketMs?: number;
}

/**
 * Several instances over one PostgreSQL, on the safe side: per key, counts in 1-second buckets
 * on the database's clock (µs), each bucket counting all its acceptances until its latest one
 * has left the window. Never more than L accepted in any rolling 60 s across instances; at
 * worst a request is refused less than one bucket (1 s) before an exact log would accept it.
 * Runs on the store's own pool: one round trip per request. Rows of idle keys are deleted by
 * the housekeeping (sweepIdleRateLimits).
 */
export class PostgresRateLimiter implements RateLimiter {
  private readonly pool: pg.Pool;
  private readonly now: (() => number) | undefined;
  private readonly bucketMs: number;

  constructor(pool: pg.Pool, options: PostgresRateLimiterOptions = {}) {
    this.pool = pool;
    this.now = options.now;
    this.bucketMs = options.bucketMs ?? BUCKET_MS;
  }

  async take(keyId: string, limit: number): Promise<RateDecision> {
    // Prepared once per connection by the store's client, as every parameterised statement is.
    const { rows } = await this.pool.query<{ allowed: boolean; used: number; free_at_us: number | null; now_us: number }>(
      rateLimitSql.take, [keyId, limit, WINDOW_MS, this.bucketMs, this.now ? Math.round(this.now() * 1000) : null]);
    const row = rows[0]!;
    // bigint columns arrive as numbers from the store's pool, as strings from a plain pg pool.
    const freeAtMs = row.free_at_us === null ? null : Number(row.free_at_us) / 1000;
    return decision(row.allowed, limit, Number(row.used), freeAtMs, Number(row.now_us) / 1000);
  }

  async ping(): Promise<void> {} // the database's own ping (/readyz) covers it: it is the same pool

  async close(): Promise<void> {} // the pool is the store's; it closes with the store
}

/** Deletes the rows of keys idle for a whole window (whichever limiter is in use); returns how many went. */
export async function sweepIdleRateLimits(pool: pg.Pool): Promise<number> {
  const result = await pool.query(rateLimitSql.sweep);
  return result.rowCount ?? 0;
}
