import assert from 'node:assert/strict';
import { test } from 'node:test';
import { MemoryRateLimiter } from './memory.ts';
import { rateLimiterConformance } from './rate-limiter.conformance.ts';
import { WINDOW_MS } from './rate-limiter.ts';

rateLimiterConformance('MemoryRateLimiter', (() => { const one = new MemoryRateLimiter(); return () => one; })());

/** A limiter on a clock the test moves by hand. */
function limiterAt(startMs = 1_000_000) {
  const clock = { now: startMs };
  return { clock, limiter: new MemoryRateLimiter(() => clock.now) };
}

test('accepts again exactly when the oldest acceptance leaves the window', async () => {
  const { clock, limiter } = limiterAt();
  const t0 = clock.now;
  for (const offset of [0, 10_000, 20_000]) {
    clock.now = t0 + offset;
    assert.equal((await limiter.take('k', 3)).allowed, true);
  }
  clock.now = t0 + WINDOW_MS - 1;
  const refused = await limiter.take('k', 3);
  assert.equal(refused.allowed, false);
  assert.equal(refused.resetSeconds, 1);
  clock.now = t0 + WINDOW_MS;
  assert.equal((await limiter.take('k', 3)).allowed, true, 'the acceptance at t0 has left the window');
  assert.equal((await limiter.take('k', 3)).allowed, false, 'the ones at +10 s and +20 s and the new one are still in it');
  clock.now = t0 + 10_000 + WINDOW_MS;
  assert.equal((await limiter.take('k', 3)).allowed, true);
});

test('refused requests use up nothing: acceptance resumes when the accepted ones age out', async () => {
  const { clock, limiter } = limiterAt();
  const t0 = clock.now;
  for (let i = 0; i < 4; i++) await limiter.take('k', 4);
  for (let s = 1; s < 60; s++) {
    clock.now = t0 + s * 1000;
    const d = await limiter.take('k', 4);
    assert.equal(d.allowed, false);
    assert.equal(d.resetSeconds, 60 - s, 'the wait counts down from the oldest acceptance, not from the refusals');
  }
  clock.now = t0 + WINDOW_MS;
  for (let i = 0; i < 4; i++) assert.equal((await limiter.take('k', 4)).allowed, true, `request ${i + 1} after the window`);
  assert.equal((await limiter.take('k', 4)).allowed, false);
});

test('matches an exact sliding log on a long irregular stream: never more than L in any rolling 60 s', async () => {
  const { clock, limiter } = limiterAt();
  const limit = 7;
  const accepted: number[] = [];
  let seed = 42; // a fixed pseudo-random stream, so a failure replays
  const nextGapMs = () => { seed = (seed * 1103515245 + 12345) % 2 ** 31; return seed % 9000; };
  for (let i = 0; i < 3000; i++) {
    clock.now += nextGapMs();
    const inWindow = accepted.filter((at) => at > clock.now - WINDOW_MS).length;
    const d = await limiter.take('k', limit);
    assert.equal(d.allowed, inWindow < limit, `request ${i} at ${clock.now}: ${inWindow} accepted in the last minute`);
    if (d.allowed) {
      accepted.push(clock.now);
      assert.equal(d.remaining, limit - (inWindow + 1));
    }
  }
  // The property itself, checked over every window that ends at an acceptance.
  for (let i = limit; i < accepted.length; i++) assert.ok(accepted[i]! - accepted[i - limit]! >= WINDOW_MS);
  assert.ok(accepted.length > 100, 'the stream exercised both accepting and refusing');
});

test('a key idle for a whole window starts again with a full quota', async () => {
  const { clock, limiter } = limiterAt();
  await limiter.take('k', 2);
  await limiter.take('k', 2);
  clock.now += 5 * WINDOW_MS;
  assert.deepEqual(await limiter.take('k', 2), { allowed: true, limit: 2, remaining: 1, resetSeconds: 0 });
});

test('a changed limit keeps the newest acceptances', async () => {
  const { clock, limiter } = limiterAt();
  for (let i = 0; i < 5; i++) { clock.now += 1000; await limiter.take('k', 5); }
  assert.equal((await limiter.take('k', 3)).allowed, false, 'three of the five are still in the window');
  assert.equal((await limiter.take('k', 10)).allowed, true);
});

test('a changed limit counts every acceptance still in the window, oldest first', async () => {
  const { clock, limiter } = limiterAt();
  const t0 = clock.now;
  for (let i = 0; i < 5; i++) { await limiter.take('k', 5); clock.now += 1000; } // at t0 … t0+4 s
  const refused = await limiter.take('k', 2);
  assert.equal(refused.allowed, false);
  assert.equal(refused.resetSeconds, 60 - 5 + 3, 'two fewer than five: the fourth acceptance (t0+3 s) must leave');
  clock.now = t0 + 3000 + WINDOW_MS;
  assert.equal((await limiter.take('k', 2)).allowed, true);
});

test('memory follows what can be in a window, not the limit: a key with L = 50,000,000', async () => {
  const { clock, limiter } = limiterAt();
  const limit = 50_000_000;
  const before = process.memoryUsage().arrayBuffers;
  // Five thousand takes in one millisecond make one run; then five thousand in as many milliseconds.
  for (let i = 0; i < 5000; i++) assert.equal((await limiter.take('big', limit)).allowed, true);
  assert.deepEqual(limiter.held('big'), { runs: 1, capacity: 4 });
  for (let i = 0; i < 5000; i++) { clock.now += 1; await limiter.take('big', limit); }
  const held = limiter.held('big')!;
  assert.equal(held.runs, 5001);
  assert.ok(held.capacity <= 8192, `capacity ${held.capacity}`);
  const grown = process.memoryUsage().arrayBuffers - before;
  // An array of L slots would be 400 MB; runs cost 12 bytes each (and the ring at most doubles).
  assert.ok(grown < 2_000_000, `array buffers grew by ${grown} bytes`);
  const d = await limiter.take('big', limit);
  assert.deepEqual(d, { allowed: true, limit, remaining: limit - 10_001, resetSeconds: 0 });
});

test('a busy key never holds more than one run per millisecond of the window, and shrinks when quiet', async () => {
  const { clock, limiter } = limiterAt();
  for (let i = 0; i < 150_000; i++) { clock.now += 1; await limiter.take('k', 100_000_000); }
  assert.ok(limiter.held('k')!.runs <= WINDOW_MS, `runs ${limiter.held('k')!.runs}`);
  assert.ok(limiter.held('k')!.capacity <= 65_536, `capacity ${limiter.held('k')!.capacity}`);
  clock.now += WINDOW_MS - 10; // all but the last ten milliseconds' runs leave
  await limiter.take('k', 100_000_000);
  assert.equal(limiter.held('k')!.runs, 11);
  assert.ok(limiter.held('k')!.capacity <= 64, `capacity ${limiter.held('k')!.capacity}`);
});

test('on a clock with fractions of a millisecond it errs only towards refusing, and never waits past 60 s', async () => {
  const { clock, limiter } = limiterAt(1_000_000.25);
  assert.equal((await limiter.take('k', 2)).allowed, true);
  clock.now = 1_000_000.75; // the same millisecond: one run, its time now .75
  const second = await limiter.take('k', 2);
  assert.deepEqual(second, { allowed: true, limit: 2, remaining: 0, resetSeconds: 60 });
  clock.now = 1_000_000.25 + WINDOW_MS; // an exact log would let the first one go here
  assert.equal((await limiter.take('k', 2)).allowed, false, 'the run counts until its latest has left');
  clock.now = 1_000_000.75 + WINDOW_MS;
  assert.equal((await limiter.take('k', 2)).allowed, true);
});

test('a clock that steps back lets nothing more through', async () => {
  const { clock, limiter } = limiterAt();
  const t0 = clock.now;
  await limiter.take('k', 2);
  clock.now = t0 - 30_000;
  assert.equal((await limiter.take('k', 2)).allowed, true);
  assert.equal((await limiter.take('k', 2)).allowed, false);
  clock.now = t0 - 30_000 + WINDOW_MS; // a window after the late one, but not after the first
  assert.equal((await limiter.take('k', 2)).allowed, false, 'the run kept its later time (t0): nothing has left yet');
  clock.now = t0 + WINDOW_MS - 1;
  assert.equal((await limiter.take('k', 2)).allowed, false);
  clock.now = t0 + WINDOW_MS;
  assert.equal((await limiter.take('k', 2)).allowed, true, 'both were filed at t0, and have left');
});

test('the wait it announces (t, Retry-After) is rounded up to whole seconds, never down', async () => {
  const { clock, limiter } = limiterAt();
  const t0 = clock.now;
  for (let i = 0; i < 3; i++) await limiter.take('k', 3);
  for (const [elapsedMs, seconds] of [[500, 60], [1_000, 59], [1_001, 59], [58_999, 2], [59_001, 1], [59_999, 1]] as const) {
    clock.now = t0 + elapsedMs;
    const refused = await limiter.take('k', 3);
    assert.equal(refused.allowed, false);
    assert.equal(refused.resetSeconds, seconds, `${elapsedMs} ms after the burst`);
  }
});
