import type { Store } from '../store/store.ts';
import { MemoryRateLimiter } from './memory.ts';
import { PostgresRateLimiter } from './postgres.ts';
import type { RateLimiter } from './rate-limiter.ts';

/** RATE_LIMIT_STORE: `auto` (unset) follows the database. */
export const RATE_LIMIT_STORES = ['auto', 'memory', 'redis', 'postgres'] as const;
export type RateLimitStore = typeof RATE_LIMIT_STORES[number];

export const isRateLimitStore = (value: string): value is RateLimitStore => (RATE_LIMIT_STORES as readonly string[]).includes(value);

export const POSTGRES_LIMITER_NEEDS_POSTGRES = 'RATE_LIMIT_STORE=postgres needs a PostgreSQL DATABASE_URL (postgres://…)';

/** The store a RATE_LIMIT_STORE choice means on this database: `auto` follows it. */
export function resolvedRateLimitStore(choice: RateLimitStore, onPostgres: boolean): Exclude<RateLimitStore, 'auto'> {
  return choice === 'auto' ? (onPostgres ? 'postgres' : 'memory') : choice;
}

/**
 * The limiter an instance uses. Unset, it follows the database: in memory on SQLite (one server
 * per file), in PostgreSQL on PostgreSQL (shared by every instance). `memory` on several
 * instances gives each its own log, so together they accept up to L per instance.
 */
export async function createRateLimiter(
  choice: RateLimitStore, store: Store, redisUrl: string, onStoreError: (error: unknown) => void = () => {},
): Promise<RateLimiter> {
  switch (resolvedRateLimitStore(choice, store.dialect === 'postgres')) {
    case 'memory':
      return new MemoryRateLimiter();
    case 'redis': {
      // Loaded only here: a server without Redis does not carry its client.
      const { RedisRateLimiter } = await import('./redis.ts');
      return new RedisRateLimiter(redisUrl, undefined, onStoreError);
    }
    case 'postgres':
      if (!store.pgPool) throw new Error(POSTGRES_LIMITER_NEEDS_POSTGRES);
      return new PostgresRateLimiter(store.pgPool);
  }
}
