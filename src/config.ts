import { isIP } from 'node:net';
import { isRateLimitStore, POSTGRES_LIMITER_NEEDS_POSTGRES, RATE_LIMIT_STORES, type RateLimitStore } from './ratelimit/select.ts';
import { SQLITE_SYNCHRONOUS_MODES, type SqliteSynchronous } from './store/node-sqlite-adapter.ts';
import { DEFAULT_DATABASE_URL, isPostgresUrl } from './store/store.ts';

/** Every server setting, read from the environment once. README lists each of them. */
export interface Config {
  port: number;
  host: string;
  databaseUrl: string;
  sqliteSynchronous: SqliteSynchronous;
  logLevel: string;
  waitCeilingMs: number;
  duplicateWindowMs: number;
  idempotencyTtlMs: number;
  defaultRateLimitPerMinute: number;
  maxRateLimitPerMinute: number;
  rateLimitStore: RateLimitStore;
  redisUrl: string;
  freeAgentLimit: number;
  proAgentLimit: number;
  agentConcurrency: number;
  runnerConcurrency: number;
  leaseMs: number;
  shutdownGraceMs: number;
  scryptCostLog2: number;
  webSessionIdleMinutes: number;
  /** Fastify's trustProxy: which proxies in front may name the client (see parseTrustProxy). */
  trustProxy: boolean | number | string[];
  instanceId: string;
}

function int(env: NodeJS.ProcessEnv, name: string, fallback: number, min: number, max: number): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < min || value > max) {
    throw new Error(`${name} must be an integer between ${min} and ${max} (got "${raw}")`);
  }
  return value;
}

// Named ranges that proxy-addr (Fastify's trustProxy) knows.
const NAMED_RANGES = new Set(['loopback', 'linklocal', 'uniquelocal']);

function isAddressOrRange(entry: string): boolean {
  if (NAMED_RANGES.has(entry)) return true;
  const [address, bits, extra] = entry.split('/');
  const version = isIP(address ?? '');
  if (version === 0 || extra !== undefined) return false;
  if (bits === undefined) return true;
  return /^\d{1,3}$/.test(bits) && Number(bits) <= (version === 4 ? 32 : 128);
}

/**
 * TRUST_PROXY → which hops of X-Forwarded-For to believe (client IP for the log-in throttle,
 * https for Secure cookies). A number counts the proxies in front of the server (1: one reverse
 * proxy, whose own entry names the client); a list names the proxies' addresses or ranges.
 * `true` believes every hop, so a client can name any IP it likes unless the proxy replaces the
 * header rather than appending to it.
 */
export function parseTrustProxy(raw: string | undefined): boolean | number | string[] {
  const value = (raw ?? '').trim();
  if (value === '' || value === 'false' || value === '0') return false;
  if (value === 'true') return true;
  if (/^\d+$/.test(value) && Number(value) <= 100) return Number(value);
  const entries = value.split(',').map((entry) => entry.trim()).filter((entry) => entry !== '');
  if (entries.length > 0 && entries.every(isAddressOrRange)) return entries;
  throw new Error('TRUST_PROXY must be false, the number of proxies in front (e.g. 1), their addresses or ranges '
    + `(e.g. 10.0.0.5,10.1.0.0/16,loopback), or true (believes every X-Forwarded-For hop) (got "${raw}")`);
}

export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const maxRateLimitPerMinute = int(env, 'MAX_RATE_LIMIT_PER_MINUTE', 10_000, 1, 100_000_000);
  // Unset: follow the database (memory on SQLite, postgres on PostgreSQL); see ratelimit/select.ts.
  const rateLimitStore = env.RATE_LIMIT_STORE || 'auto';
  if (!isRateLimitStore(rateLimitStore)) {
    const named = RATE_LIMIT_STORES.filter((store) => store !== 'auto').map((store) => `"${store}"`).join(', ');
    throw new Error(`RATE_LIMIT_STORE must be one of ${named}, or unset to follow the database (got "${rateLimitStore}")`);
  }
  // Refused here already, so that a misconfigured server stops before it opens anything.
  if (rateLimitStore === 'postgres' && !isPostgresUrl(env.DATABASE_URL ?? '')) throw new Error(POSTGRES_LIMITER_NEEDS_POSTGRES);
  const sqliteSynchronous = (env.SQLITE_SYNCHRONOUS || 'full').toLowerCase();
  if (!SQLITE_SYNCHRONOUS_MODES.includes(sqliteSynchronous as SqliteSynchronous)) {
    throw new Error(`SQLITE_SYNCHRONOUS must be ${SQLITE_SYNCHRONOUS_MODES.map((mode) => `"${mode}"`).join(' or ')} (got "${env.SQLITE_SYNCHRONOUS}")`);
  }
  return {
    port: int(env, 'PORT', 8080, 0, 65535),
    host: env.HOST || '127.0.0.1',
    databaseUrl: env.DATABASE_URL || DEFAULT_DATABASE_URL,
    sqliteSynchronous: sqliteSynchronous as SqliteSynchronous,
    logLevel: env.LOG_LEVEL || 'info',
    waitCeilingMs: int(env, 'WAIT_CEILING_MS', 25_000, 0, 600_000),
    duplicateWindowMs: int(env, 'DUPLICATE_WINDOW_MS', 10_000, 0, 3_600_000),
    idempotencyTtlMs: int(env, 'IDEMPOTENCY_TTL_HOURS', 24, 1, 24 * 30) * 3_600_000,
    defaultRateLimitPerMinute: int(env, 'DEFAULT_RATE_LIMIT_PER_MINUTE', 60, 1, maxRateLimitPerMinute),
    maxRateLimitPerMinute,
    rateLimitStore,
    redisUrl: env.REDIS_URL || 'redis://127.0.0.1:6379',
    freeAgentLimit: int(env, 'FREE_PLAN_AGENT_LIMIT', 1, 0, 1_000_000),
    proAgentLimit: int(env, 'PRO_PLAN_AGENT_LIMIT', 100, 0, 1_000_000),
    agentConcurrency: int(env, 'AGENT_CONCURRENCY', 1, 1, 1000),
    // A turn mostly waits on its model (or its tools), not on this process's CPU.
    runnerConcurrency: int(env, 'RUNNER_CONCURRENCY', 256, 1, 10_000),
    leaseMs: int(env, 'JOB_LEASE_MS', 15_000, 1_000, 3_600_000),
    shutdownGraceMs: int(env, 'SHUTDOWN_GRACE_MS', 10_000, 0, 600_000),
    scryptCostLog2: int(env, 'SCRYPT_COST_LOG2', 17, 10, 20),
    webSessionIdleMinutes: int(env, 'WEB_SESSION_IDLE_MINUTES', 120, 1, 60 * 24 * 30),
    trustProxy: parseTrustProxy(env.TRUST_PROXY),
    instanceId: env.INSTANCE_ID || `${process.pid}-${Math.random().toString(36).slice(2, 8)}`,
  };
}
