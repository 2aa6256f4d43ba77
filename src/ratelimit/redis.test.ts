import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { Redis } from 'ioredis';
import { redisAnswers, TEST_REDIS_URL } from '../testing/redis.ts';
import { randomBase62 } from '../domain/ids.ts';
import { rateLimiterConformance } from './rate-limiter.conformance.ts';
import { WINDOW_MS } from './rate-limiter.ts';
import { RedisRateLimiter } from './redis.ts';

/**
 * The Redis limiter against a real Redis (REDIS_URL, default 127.0.0.1:6379), under a key prefix
 * of its own per run, removed afterwards. Without a Redis it skips, except under CI=true.
 */
const PREFIX = `agent-channel-test:${randomBase62(10)}:`;


const reachable = await redisAnswers();
if (!reachable && process.env.CI === 'true') throw new Error(`Redis does not answer at ${TEST_REDIS_URL}; CI requires the Redis limiter tests.`);
const skip = reachable ? false : `Redis does not answer at ${TEST_REDIS_URL} (start redis-server to run these)`;

const instances: RedisRateLimiter[] = reachable ? [0, 1, 2].map(() => new RedisRateLimiter(TEST_REDIS_URL, PREFIX)) : [];
const admin = reachable ? new Redis(TEST_REDIS_URL) : null;
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

/** Fills a key's log with `count` acceptances filed `ageMs` before Redis's own now. */
async function seedLog(keyId: string, count: number, ageMs: number): Promise<void> {
  const [seconds, micros] = await admin!.time();
  const at = Number(seconds) * 1_000_000 + Number(micros) - ageMs * 1000;
  const keys = instances[0]!.keysOf(keyId);
  await admin!.rpush(keys.runs, `${at}:${count}`);
  await admin!.set(keys.total, count, 'PX', WINDOW_MS);
  await admin!.pexpire(keys.runs, WINDOW_MS);
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
  const keys = instances[0]!.keysOf(key);
  const runs = await admin!.lrange(keys.runs, 0, -1);
  assert.equal(runs.reduce((sum, run) => sum + Number(run.split(':')[1]), 0), 2);
  assert.equal(await admin!.get(keys.total), '2');
});

test('RedisRateLimiter: a key with L = 50,000,000 holds one run per millisecond, not one entry per request', { skip }, async () => {
  const key = `k${randomBase62(12)}`;
  const limit = 50_000_000;
  const decisions = await Promise.all(Array.from({ length: 3000 }, (_, i) => instances[i % 3]!.take(key, limit)));
  assert.ok(decisions.every((d) => d.allowed));
  const keys = instances[0]!.keysOf(key);
  const runs = await admin!.lrange(keys.runs, 0, -1);
  assert.equal(runs.reduce((sum, run) => sum + Number(run.split(':')[1]), 0), 3000, 'every acceptance is counted');
  assert.equal(await admin!.get(keys.total), '3000');
  const stamps = runs.map((run) => Number(run.split(':')[0]));
  assert.ok(stamps.every((at, i) => i === 0 || Math.floor(at / 1000) > Math.floor(stamps[i - 1]! / 1000)), 'runs are oldest first, one per millisecond');
  assert.ok(runs.length < 3000, `${runs.length} runs for 3000 requests`);
  const bytes = Number(await admin!.call('MEMORY', 'USAGE', keys.runs));
  assert.ok(bytes < 64 * 1024, `the log takes ${bytes} bytes`);
  const next = await instances[1]!.take(key, limit);
  assert.equal(next.remaining, limit - 3001);
});

test('RedisRateLimiter: a lost total is counted again from the runs', { skip }, async () => {
  const key = `k${randomBase62(12)}`;
  for (let i = 0; i < 3; i++) await instances[i]!.take(key, 4);
  await admin!.del(instances[0]!.keysOf(key).total);
  const last = await instances[0]!.take(key, 4);
  assert.deepEqual({ allowed: last.allowed, remaining: last.remaining }, { allowed: true, remaining: 0 });
  assert.equal((await instances[1]!.take(key, 4)).allowed, false);
});

test('RedisRateLimiter: a limit lowered below what the window holds waits for enough to leave', { skip }, async () => {
  const key = `k${randomBase62(12)}`;
  await seedLog(key, 2, WINDOW_MS - 3_000); // leave in about 3 s
  await instances[0]!.take(key, 10); // leaves in about 60 s
  const refused = await instances[1]!.take(key, 2);
  assert.equal(refused.allowed, false);
  assert.ok(refused.resetSeconds >= 2 && refused.resetSeconds <= 3, `resetSeconds ${refused.resetSeconds}`);
  const lower = await instances[2]!.take(key, 1);
  assert.ok(lower.resetSeconds >= 59 && lower.resetSeconds <= 60, `resetSeconds ${lower.resetSeconds}`);
});

test('RedisRateLimiter: a run filed ahead of Redis\'s clock (a clock that stepped back) keeps its later time', { skip }, async () => {
  const key = `k${randomBase62(12)}`;
  await seedLog(key, 1, -30_000); // filed 30 s ahead of Redis's now
  const keys = instances[0]!.keysOf(key);
  const [seeded] = await admin!.lrange(keys.runs, 0, -1);
  assert.equal((await instances[1]!.take(key, 2)).allowed, true);
  assert.equal((await instances[2]!.take(key, 2)).allowed, false);
  // The late acceptance joined the newest run, whose time only moves later: both count until
  // the run's later time has left the window, not Redis's now.
  assert.deepEqual(await admin!.lrange(keys.runs, 0, -1), [`${seeded!.split(':')[0]}:2`]);
});

test('RedisRateLimiter: the log lives in Redis at least as long as its newest acceptance counts', { skip }, async () => {
  const key = `k${randomBase62(12)}`;
  const keys = instances[0]!.keysOf(key);
  const started = Date.now();
  await instances[0]!.take(key, 5);
  const [runsTtl, totalTtl] = [await admin!.pttl(keys.runs), await admin!.pttl(keys.total)];
  const elapsed = Date.now() - started;
  // Expired any sooner, the key would get a fresh quota while its acceptance is still in the window.
  assert.ok(runsTtl >= WINDOW_MS - elapsed, `runs expire in ${runsTtl} ms`);
  assert.ok(totalTtl >= WINDOW_MS - elapsed, `total expires in ${totalTtl} ms`);
});

test('RedisRateLimiter: a total left without its runs (one of the two evicted) starts the key afresh', { skip }, async () => {
  const key = `k${randomBase62(12)}`;
  const keys = instances[0]!.keysOf(key);
  await admin!.set(keys.total, 5, 'PX', WINDOW_MS);
  assert.deepEqual(await instances[1]!.take(key, 3), { allowed: true, limit: 3, remaining: 2, resetSeconds: 0 });
  assert.equal(await admin!.get(keys.total), '1');
});
