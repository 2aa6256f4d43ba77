import { Redis, ReplyError } from 'ioredis';
import { markStoreUnavailable } from '../store/unavailable.ts';
import { decision, WINDOW_MS, type RateDecision, type RateLimiter } from './rate-limiter.ts';

// One atomic step on Redis's own clock (µs), so every instance judges by the same time.
// KEYS[1]: the key's runs, a list of "<µs>:<count>", oldest first: one run per millisecond in
// which something was accepted, its time that of the latest acceptance in it, all of which count
// while now < that + window (exact to the µs; the earlier ones of a run count less than 1 ms too
// long). KEYS[2]: the sum of their counts. A key holds at most min(L, 60,001) runs however large
// L is. Returns { accepted 0|1, used in window, µs at which a request is next sure to pass or
// -1, now µs }.
const TAKE = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local limit = tonumber(ARGV[1])
local windowMs = tonumber(ARGV[2])
local window = windowMs * 1000

local function parse(run)
  local sep = string.find(run, ':', 1, true)
  return tonumber(string.sub(run, 1, sep - 1)), tonumber(string.sub(run, sep + 1))
end

local size = redis.call('LLEN', KEYS[1])
local raw = redis.call('GET', KEYS[2])
local total = raw and tonumber(raw)
if not total then
  -- the total expired apart from its runs (or was never written): count them again
  total = 0
  if size > 0 then
    for _, run in ipairs(redis.call('LRANGE', KEYS[1], 0, -1)) do
      local _, count = parse(run)
      total = total + count
    end
  end
end

local changed = false
while size > 0 do
  local at, count = parse(redis.call('LINDEX', KEYS[1], 0))
  if at + window > now then break end
  redis.call('LPOP', KEYS[1])
  total = total - count
  size = size - 1
  changed = true
end
if size == 0 then total = 0 end

local accepted = 0
if total < limit then
  local at, count = nil, nil
  if size > 0 then at, count = parse(redis.call('LINDEX', KEYS[1], -1)) end
  if at and math.floor(at / 1000) >= math.floor(now / 1000) then
    -- the same millisecond (or a clock that stepped back) joins the newest run, whose time only
    -- ever moves later
    redis.call('LSET', KEYS[1], -1, string.format('%d:%d', math.max(at, now), count + 1))
  else
    redis.call('RPUSH', KEYS[1], string.format('%d:1', now))
    size = size + 1
  end
  total = total + 1
  accepted = 1
  changed = true
end
if changed then
  redis.call('SET', KEYS[2], total, 'PX', windowMs + 1000)
  redis.call('PEXPIRE', KEYS[1], windowMs + 1000)
end

local freeAt = -1
if total >= limit then
  -- each run holds at least one, so the first (total - limit + 1) runs are enough to look at
  local left = total
  for _, run in ipairs(redis.call('LRANGE', KEYS[1], 0, total - limit)) do
    local at, count = parse(run)
    left = left - count
    if left < limit then
      freeAt = at + window
      break
    end
  end
end
return { accepted, total, freeAt, now }
`;

/**
 * Several instances, exact: per key a deque of (millisecond, count) runs in Redis, so memory
 * follows what can be in a window (at most 60,001 runs), not the limit.
 */
export class RedisRateLimiter implements RateLimiter {
  private readonly redis: Redis;
  private readonly prefix: string;

  /**
   * While Redis cannot be reached, each take fails within about a second (so the request gets a
   * 503 at once rather than after ioredis's retries), and `onError` hears of it once per outage
   * (ioredis would print every reconnect attempt on stderr, forever, with no listener).
   */
  constructor(url: string, prefix = 'agent-channel:rl:', onError: (error: unknown) => void = () => {}) {
    this.redis = new Redis(url, { lazyConnect: false, maxRetriesPerRequest: 1, enableOfflineQueue: true, connectTimeout: 1000, commandTimeout: 1000 });
    let reachable = true;
    this.redis.on('error', (error: unknown) => {
      if (reachable) onError(error);
      reachable = false;
    });
    this.redis.on('ready', () => { reachable = true; });
    this.redis.defineCommand('acTake', { numberOfKeys: 2, lua: TAKE });
    this.prefix = prefix;
  }

  /** The Redis keys of one API key's log (one hash slot, for Redis Cluster). */
  keysOf(keyId: string): { runs: string; total: string } {
    return { runs: `${this.prefix}{${keyId}}:runs`, total: `${this.prefix}{${keyId}}:total` };
  }

  async take(keyId: string, limit: number): Promise<RateDecision> {
    const keys = this.keysOf(keyId);
    let answer: [number, number, number, number];
    try {
      answer = (await (this.redis as unknown as {
        acTake(runs: string, total: string, limit: number, window: number): Promise<number[]>;
      }).acTake(keys.runs, keys.total, limit, WINDOW_MS)) as [number, number, number, number];
    } catch (error) {
      // Redis answering with an error is a fault of ours (the script, a key of the wrong type);
      // anything else (closed, refused, timed out) is Redis away.
      if (!(error instanceof ReplyError)) markStoreUnavailable(error);
      throw error;
    }
    const [accepted, used, freeAt, now] = answer;
    return decision(accepted === 1, limit, used, freeAt < 0 ? null : freeAt / 1000, now / 1000);
  }

  async ping(): Promise<void> {
    await this.redis.ping(); // fails within the command timeout while Redis is down
  }

  async close(): Promise<void> {
    await this.redis.quit().catch(() => this.redis.disconnect());
  }
}
