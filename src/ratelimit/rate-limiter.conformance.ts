import assert from 'node:assert/strict';
import { test } from 'node:test';
import { randomBase62 } from '../domain/ids.ts';
import { WINDOW_MS, type RateLimiter } from './rate-limiter.ts';

/**
 * What every RateLimiter must do, whatever holds its log; run by each implementation's test
 * file (memory.test.ts, redis.test.ts, postgres.test.ts). Needs no control of the clock: these
 * all happen well inside one window.
 */
export function rateLimiterConformance(name: string, limiter: () => RateLimiter, options: { skip?: string | false } = {}): void {
  const it = (title: string, fn: () => Promise<void>) => test(`${name}: ${title}`, { skip: options.skip ?? false }, fn);
  const freshKey = () => `k${randomBase62(12)}`;

  it('accepts a burst of exactly L, counting remaining down, then refuses', async () => {
    const key = freshKey();
    const limit = 5;
    for (let i = 1; i <= limit; i++) {
      const { resetSeconds, ...d } = await limiter().take(key, limit);
      assert.deepEqual(d, { allowed: true, limit, remaining: limit - i });
      // t: seconds until a request is next sure to be accepted: now, until the L-th fills the window.
      if (i < limit) assert.equal(resetSeconds, 0);
      else assert.ok(resetSeconds >= 1 && resetSeconds <= WINDOW_MS / 1000, `resetSeconds ${resetSeconds} once the window is full`);
    }
    const refused = await limiter().take(key, limit);
    assert.equal(refused.allowed, false);
    assert.equal(refused.remaining, 0);
    assert.ok(refused.resetSeconds >= 1 && refused.resetSeconds <= WINDOW_MS / 1000, `resetSeconds ${refused.resetSeconds}`);
  });

  it('keeps refusing while the window is full, however often it is asked', async () => {
    const key = freshKey();
    await limiter().take(key, 2);
    await limiter().take(key, 2);
    for (let i = 0; i < 25; i++) assert.equal((await limiter().take(key, 2)).allowed, false);
  });

  it('keeps each key\'s log apart', async () => {
    const a = freshKey();
    const b = freshKey();
    assert.equal((await limiter().take(a, 1)).allowed, true);
    assert.equal((await limiter().take(a, 1)).allowed, false);
    assert.equal((await limiter().take(b, 1)).allowed, true);
  });

  it('accepts no more than L of many requests arriving at once', async () => {
    const key = freshKey();
    const limit = 10;
    const decisions = await Promise.all(Array.from({ length: 40 }, () => limiter().take(key, limit)));
    assert.equal(decisions.filter((d) => d.allowed).length, limit);
    assert.ok(decisions.filter((d) => !d.allowed).every((d) => d.remaining === 0 && d.resetSeconds >= 1 && d.resetSeconds <= WINDOW_MS / 1000));
  });
}
