import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { randomBase62 } from '../domain/ids.ts';
import { openStore, type Store } from '../store/store.ts';
import { freshDatabase, TEST_DB } from '../testing/harness.ts';
import { BUCKET_MS, PostgresRateLimiter, sweepIdleRateLimits } from './postgres.ts';
import { rateLimiterConformance } from './rate-limiter.conformance.ts';
import { WINDOW_MS } from './rate-limiter.ts';

/**
 * The PostgreSQL limiter against a real PostgreSQL, in the PostgreSQL pass: a fresh schema (its
 * migrations create the log), two stores on it standing for two instances, dropped afterwards.
 */
const skip = TEST_DB === 'postgres' ? false : 'runs in the PostgreSQL pass (TEST_DB=postgres)';
const database = skip ? null : await freshDatabase();
const stores: Store[] = [];
for (let i = 0; database && i < 2; i++) stores.push(await openStore(database.url, { pgSchema: database.pgSchema! }));
const instances = stores.map((store) => new PostgresRateLimiter(store.pgPool!));
let turn = 0;

after(async () => {
  await Promise.all(instances.map((i) => i.close()));
  await Promise.all(stores.map((s) => s.close()));
  await database?.drop();
});

// Each call goes to the other instance, so every conformance check also spans instances.
rateLimiterConformance('PostgresRateLimiter', () => instances[turn++ % instances.length]!, { skip });

const freshKey = () => `k${randomBase62(12)}`;
/** A start on a whole second, a year ahead: a sweep on the real clock never touches these rows. */
const futureStart = () => Math.ceil((Date.now() + 365 * 24 * 3_600_000) / 1000) * 1000;

/** Two instances (one per store) on one clock the test moves by hand. */
function instancesAt(startMs: number, bucketMs?: number) {
  const clock = { now: startMs };
  const pair = stores.map((store) => new PostgresRateLimiter(store.pgPool!, { now: () => clock.now, ...(bucketMs ? { bucketMs } : {}) }));
  return { clock, pair };
}

/** A key's row, its bucket times in ms. */
async function row(keyId: string): Promise<{ lasts: number[]; counts: number[]; total: number; xmin: string; bytes: number } | undefined> {
  const { rows } = await stores[0]!.pgPool!.query(
    'select lasts, counts, total, xmin::text as xmin, pg_column_size(w.*) as bytes from rate_limit_windows w where key_id = $1', [keyId]);
  return rows[0] && { ...rows[0], lasts: rows[0].lasts.map((us: string) => Number(us) / 1000), counts: rows[0].counts.map(Number) };
}

test('PostgresRateLimiter: two instances sharing a key accept exactly L of many concurrent requests', { skip }, async () => {
  const key = freshKey();
  const limit = 25;
  const decisions = await Promise.all(Array.from({ length: 200 }, (_, i) => instances[i % 2]!.take(key, limit)));
  assert.equal(decisions.filter((d) => d.allowed).length, limit);
  assert.ok(decisions.filter((d) => !d.allowed).every((d) => d.remaining === 0 && d.resetSeconds >= 1 && d.resetSeconds <= 61));
  assert.equal((await row(key))!.total, limit);
});

/** A fixed pseudo-random stream of gaps, so that a failure replays. */
function gaps(seed: number, maxGapMs: number) {
  return () => { seed = (seed * 1103515245 + 12345) % 2 ** 31; return seed % maxGapMs; };
}

test('PostgresRateLimiter: on a long irregular stream across two instances, never more than L in any rolling 60 s', { skip }, async () => {
  const { clock, pair } = instancesAt(futureStart() + 123);
  const limit = 7;
  const key = freshKey();
  const accepted: number[] = [];
  const nextGapMs = gaps(42, 9000);
  // The model: an acceptance counts until the latest one of its second has left the window.
  const latestOfSecond = new Map<number, number>();
  const bucketLast = (at: number) => latestOfSecond.get(Math.floor(at / BUCKET_MS))!;
  const countedNow = () => accepted.filter((a) => bucketLast(a) + WINDOW_MS > clock.now);
  for (let i = 0; i < 1500; i++) {
    clock.now += nextGapMs();
    const counted = countedNow().length;
    const exactWithSlack = accepted.filter((at) => at > clock.now - WINDOW_MS - BUCKET_MS).length;
    const d = await pair[i % 2]!.take(key, limit);
    assert.equal(d.allowed, counted < limit, `request ${i} at +${clock.now % 1_000_000}: ${counted} counted`);
    if (exactWithSlack < limit) assert.ok(d.allowed, 'refused at most one bucket longer than an exact log would');
    if (d.allowed) {
      accepted.push(clock.now);
      latestOfSecond.set(Math.floor(clock.now / BUCKET_MS), clock.now);
      assert.equal(d.remaining, limit - (counted + 1));
    } else {
      const freeAt = bucketLast(countedNow()[counted - limit]!) + WINDOW_MS;
      assert.equal(d.resetSeconds, Math.ceil((freeAt - clock.now) / 1000));
      assert.ok(d.resetSeconds >= 1 && d.resetSeconds <= 60);
    }
  }
  for (let i = limit; i < accepted.length; i++) assert.ok(accepted[i]! - accepted[i - limit]! >= WINDOW_MS);
  assert.ok(accepted.length > 100, 'the stream exercised both accepting and refusing');
  assert.ok((await row(key))!.lasts.length <= WINDOW_MS / BUCKET_MS + 1);
});

test('PostgresRateLimiter: with 1 ms buckets it is an exact sliding log', { skip }, async () => {
  const { clock, pair } = instancesAt(futureStart(), 1);
  const limit = 5;
  const key = freshKey();
  const accepted: number[] = [];
  const nextGapMs = gaps(7, 12_000);
  for (let i = 0; i < 800; i++) {
    clock.now += nextGapMs();
    const inWindow = accepted.filter((at) => at > clock.now - WINDOW_MS).length;
    const d = await pair[i % 2]!.take(key, limit);
    assert.equal(d.allowed, inWindow < limit, `request ${i}: ${inWindow} accepted in the last minute`);
    if (d.allowed) accepted.push(clock.now);
  }
  assert.ok(accepted.length > 50);
});

test('PostgresRateLimiter: refusals write nothing, and the wait counts down from the oldest bucket', { skip }, async () => {
  const { clock, pair } = instancesAt(futureStart());
  const t0 = clock.now;
  const key = freshKey();
  for (const offset of [0, 400, 10_000, 20_000]) {
    clock.now = t0 + offset;
    assert.equal((await pair[0]!.take(key, 4)).allowed, true);
  }
  const written = (await row(key))!;
  assert.deepEqual({ lasts: written.lasts, counts: written.counts, total: written.total },
    { lasts: [t0 + 400, t0 + 10_000, t0 + 20_000], counts: [2, 1, 1], total: 4 }, 'the first two share a one-second bucket');
  for (let s = 21; s <= 60; s++) {
    clock.now = t0 + s * 1000;
    const d = await pair[s % 2]!.take(key, 4);
    assert.deepEqual(d, { allowed: false, limit: 4, remaining: 0, resetSeconds: 61 - s });
  }
  assert.equal((await row(key))!.xmin, written.xmin, 'the row was not rewritten by any refusal');
  clock.now = t0 + WINDOW_MS + 399;
  assert.equal((await pair[1]!.take(key, 4)).allowed, false, 'the bucket counts until its latest (t0+400 ms) has left');
  clock.now = t0 + WINDOW_MS + 400;
  assert.deepEqual(await pair[0]!.take(key, 4), { allowed: true, limit: 4, remaining: 1, resetSeconds: 0 });
  assert.deepEqual(await pair[1]!.take(key, 4), { allowed: true, limit: 4, remaining: 0, resetSeconds: 10 });
  assert.deepEqual((await row(key))!.lasts, [t0 + 10_000, t0 + 20_000, t0 + WINDOW_MS + 400]);
});

test('PostgresRateLimiter: a lowered limit waits until enough buckets have left', { skip }, async () => {
  const { clock, pair } = instancesAt(futureStart());
  const t0 = clock.now;
  const key = freshKey();
  for (let i = 0; i < 5; i++) { await pair[0]!.take(key, 5); clock.now += 1000; } // at t0 … t0+4 s
  const refused = await pair[1]!.take(key, 2);
  assert.equal(refused.allowed, false);
  assert.equal(refused.resetSeconds, 3 + 60 - 5, 'the fourth bucket (t0+3 s) must leave');
  clock.now = t0 + 3000 + WINDOW_MS;
  assert.equal((await pair[1]!.take(key, 2)).allowed, true);
});

test('PostgresRateLimiter: a clock that steps back lets nothing more through', { skip }, async () => {
  const { clock, pair } = instancesAt(futureStart());
  const t0 = clock.now;
  const key = freshKey();
  await pair[0]!.take(key, 2);
  clock.now = t0 - 30_000;
  assert.equal((await pair[1]!.take(key, 2)).allowed, true);
  assert.equal((await pair[0]!.take(key, 2)).allowed, false);
  assert.deepEqual((await row(key))!.counts, [2], 'the late one joined the newest bucket');
  assert.deepEqual((await row(key))!.lasts, [t0]);
  clock.now = t0 + WINDOW_MS;
  assert.equal((await pair[1]!.take(key, 2)).allowed, true);
});

test('PostgresRateLimiter: a key with L = 50,000,000 holds at most 61 small buckets', { skip }, async () => {
  const { clock, pair } = instancesAt(futureStart());
  const key = freshKey();
  const limit = 50_000_000;
  for (let i = 0; i < 2000; i++) {
    clock.now += 97; // 194 s of traffic: the window moves on three times
    assert.equal((await pair[i % 2]!.take(key, limit)).allowed, true);
  }
  const held = (await row(key))!;
  assert.ok(held.lasts.length <= 61, `${held.lasts.length} buckets`);
  assert.equal(held.total, held.counts.reduce((a, b) => a + b, 0));
  assert.ok(held.bytes < 1200, `the row takes ${held.bytes} bytes`);
});

test('sweepIdleRateLimits deletes the rows of idle keys and keeps the others', { skip }, async () => {
  const idle = freshKey();
  const live = freshKey();
  const past = new PostgresRateLimiter(stores[0]!.pgPool!, { now: () => Date.now() - 5 * WINDOW_MS });
  await past.take(idle, 3);
  await instances[1]!.take(live, 3);
  assert.ok((await sweepIdleRateLimits(stores[0]!.pgPool!)) >= 1);
  assert.equal(await row(idle), undefined);
  assert.ok(await row(live));
  // A key swept away starts again, with a full quota.
  assert.deepEqual(await instances[0]!.take(idle, 3), { allowed: true, limit: 3, remaining: 2, resetSeconds: 0 });
});

test('sweepIdleRateLimits keeps a key whose oldest bucket has left the window but whose newest has not', { skip }, async () => {
  const key = freshKey();
  // Two buckets written on a clock the test sets, 35 s apart: at the second, the first was still
  // in the window, so the row holds both. By the database's clock now, the first has left (65 s
  // ago) and the second has not (30 s ago): the key is not idle.
  const realNow = Date.now();
  let at = realNow - 65_000;
  const limiter = new PostgresRateLimiter(stores[0]!.pgPool!, { now: () => at });
  assert.equal((await limiter.take(key, 2)).allowed, true);
  at = realNow - 30_000;
  assert.equal((await limiter.take(key, 2)).allowed, true);
  assert.equal((await row(key))!.lasts.length, 2);
  await sweepIdleRateLimits(stores[0]!.pgPool!);
  assert.ok(await row(key), 'a key with an acceptance still in the window is kept');
  // So the acceptance 30 s ago still counts: one left, not a fresh quota of two.
  const next = await instances[1]!.take(key, 2);
  assert.deepEqual({ allowed: next.allowed, remaining: next.remaining }, { allowed: true, remaining: 0 });
});
