import { Redis } from 'ioredis';
import { decision, WINDOW_MS, type RateDecision, type RateLimiter } from './rate-limiter.ts';

// One atomic step on Redis's own clock, so every instance judges by the same time.
// Returns { accepted 0|1, used in window, oldest accepted ms or -1, now ms }.
const TAKE = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local limit = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window)
local used = redis.call('ZCARD', KEYS[1])
local accepted = 0
if used < limit then
  redis.call('ZADD', KEYS[1], now, now .. '-' .. ARGV[3])
  redis.call('PEXPIRE', KEYS[1], window)
  used = used + 1
  accepted = 1
end
local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
local oldestMs = -1
if oldest[2] then oldestMs = tonumber(oldest[2]) end
return { accepted, used, oldestMs, now }
`;

/** Several instances, exact: a sorted-set sliding log per key in Redis. */
export class RedisRateLimiter implements RateLimiter {
  private readonly redis: Redis;
  private readonly prefix: string;
  private sequence = 0;

  constructor(url: string, prefix = 'agent-channel:rl:') {
    this.redis = new Redis(url, { lazyConnect: false, maxRetriesPerRequest: 2, enableOfflineQueue: true });
    this.redis.defineCommand('acTake', { numberOfKeys: 1, lua: TAKE });
    this.prefix = prefix;
  }

  async take(keyId: string, limit: number): Promise<RateDecision> {
    const member = `${process.pid}.${++this.sequence}.${Math.random().toString(36).slice(2, 8)}`;
    const [accepted, used, oldest, now] = (await (this.redis as unknown as {
      acTake(key: string, limit: number, window: number, member: string): Promise<number[]>;
    }).acTake(this.prefix + keyId, limit, WINDOW_MS, member)) as [number, number, number, number];
    return decision(accepted === 1, limit, used, oldest < 0 ? null : oldest, now);
  }

  async close(): Promise<void> {
    await this.redis.quit().catch(() => this.redis.disconnect());
  }
}
