import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { Redis } from 'ioredis';
import { randomBase62 } from '../domain/ids.ts';
import { rateLimiterConformance } from './rate-limiter.conformance.ts';
import { WINDOW_MS } from './rate-limiter.ts';
import { RedisRateLimiter } from './redis.ts';

/**
 * The Redis limiter against a real Redis (REDIS_URL, default 127.0.0.1:6379), under a key prefix
 * of its own per run, removed afterwards. Without a Redis it skips, except under CI=true.
 */
const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const PREFIX = `agent-channel-test:${randomBase62(10)}:`;

async function redisAnswers(): Promise<boolean> {
  const probe = new Redis(REDIS_URL, { lazyConnect: true, connectTimeout: 1000, maxRetriesPerRequest: 0, retryStrategy: () => null });
  probe.on('error', () => {}); // the failed connect is the answer; nothing to report twice
  try {
    await probe.connect();
    return (await probe.ping()) === 'PONG';
  } catch {
    return false;
  } finally {
    probe.disconnect();
  }
}

const reachable = await redisAnswers();
if (!reachable && process.env.CI === 'true') throw new Error(`Redis does not answer at ${REDIS_URL}; CI requires the Redis limiter tests.`);
const skip = reachable ? false : `Redis does not answer at ${REDIS_URL} (start redis-server to run these)`;

const instances: RedisRateLimiter[] = reachable ? [0, 1, 2].map(() => new RedisRateLimiter(REDIS_URL, PREFIX)) : [];
const admin = reachable ? new Redis(REDIS_URL) : null;
let turn = 0;

after(async () => {
  if (!admin) return;
  const leftovers = await admin.keys(`${PREFIX}*`);
  if (leftovers.length > 0) await admin.del(...leftovers);
  await Promise.all(instances.map((i) => i.close()));
  admin.disconnect();
});

// Each call goes to the next instance, so every conformance check also spans instances.
rateLimiterConformance('RedisRateLimiter', () => instances[turn++ % instances.length]!, { skip });

/** Fills a key's log with `count` acceptances at `ageMs` before Redis's own now. */
async function seedLog(keyId: string, count: number, ageMs: number): Promise<void> {
  const [seconds, micros] = await admin!.time();
  const at = Number(seconds) * 1000 + Math.floor(Number(micros) / 1000) - ageMs;
  for (let i = 0; i < count; i++) await admin!.zadd(PREFIX + keyId, at, `seed-${i}`);
  await admin!.pexpire(PREFIX + keyId, WINDOW_MS);
}

test('RedisRateLimiter: a full log refuses until its oldest entry is a window old', { skip }, async () => {
  const almostOld = `k${randomBase62(12)}`;
  await seedLog(almostOld, 3, WINDOW_MS - 2_000);
  const refused = await instances[0]!.take(almostOld, 3);
  assert.equal(refused.allowed, false);
  assert.ok(refused.resetSeconds >= 1 && refused.resetSeconds <= 2, `resetSeconds ${refused.resetSeconds}`);

  const old = `k${randomBase62(12)}`;
  await seedLog(old, 3, WINDOW_MS + 1);
  const accepted = await instances[1]!.take(old, 3);
  assert.deepEqual(accepted, { allowed: true, limit: 3, remaining: 2, resetSeconds: 0 });
});

test('RedisRateLimiter: refusals leave the log as it was', { skip }, async () => {
  const key = `k${randomBase62(12)}`;
  await instances[0]!.take(key, 2);
  await instances[1]!.take(key, 2);
  for (let i = 0; i < 10; i++) await instances[i % 3]!.take(key, 2);
  assert.equal(await admin!.zcard(PREFIX + key), 2);
});

test('RedisRateLimiter: several instances sharing a key never accept more than L together', { skip }, async () => {
  const key = `k${randomBase62(12)}`;
  const limit = 25;
  const decisions = await Promise.all(Array.from({ length: 150 }, (_, i) => instances[i % instances.length]!.take(key, limit)));
  assert.equal(decisions.filter((d) => d.allowed).length, limit);
  assert.ok(decisions.filter((d) => !d.allowed).every((d) => d.remaining === 0 && d.resetSeconds >= 1));
});
