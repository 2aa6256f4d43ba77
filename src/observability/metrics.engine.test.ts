import assert from 'node:assert/strict';
import { test } from 'node:test';
import { send } from '../testing/conversation.ts';
import { proxyInFrontOf } from '../testing/frozen-database.ts';
import { freshDatabase, startTestApp, TEST_DB, type TestApp } from '../testing/harness.ts';
import { sample, scrape } from '../testing/metrics.ts';
import { queueDrained } from '../testing/missions.ts';

/** The turn engine's metrics at /metrics: what an operator watches the queue and the turns by. */

const message = { kind: 'message' };

/** Scrapes until `holds(page)` (bounded), for what the engine does after an answer went out. */
async function scrapeUntil(t: TestApp, holds: (page: string) => boolean, what: string): Promise<string> {
  for (let i = 0; i < 400; i++) {
    const page = await scrape(t);
    if (holds(page)) return page;
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  assert.fail(`/metrics never showed ${what}: ${await scrape(t)}`);
}

test('each run is counted by outcome, with its time running and its time in line', async () => {
  const t = await startTestApp();
  try {
    const u = await t.userWithAgent();
    const before = await scrape(t);
    // Every series is there from the start at 0 (a rate() over one that appears at 1 misses that 1).
    for (const kind of ['message', 'continuation']) {
      for (const outcome of ['done', 'failed', 'requeued']) assert.match(before, new RegExp(`^turns_total\\{kind="${kind}",outcome="${outcome}"\\} 0$`, 'm'));
      assert.match(before, new RegExp(`^turn_duration_seconds_count\\{kind="${kind}"\\} 0$`, 'm'));
    }
    assert.equal((await send(t, u, { text: 'hello' })).statusCode, 200);
    assert.equal((await send(t, u, { text: '!fail on purpose' })).statusCode, 502);
    const after = await scrapeUntil(t, (page) => sample(page, 'turn_duration_seconds_count', message) === 2, 'two runs timed');
    const grew = (name: string, labels: Record<string, string>) => sample(after, name, labels) - sample(before, name, labels);
    assert.equal(grew('turns_total', { ...message, outcome: 'done' }), 1);
    assert.equal(grew('turns_total', { ...message, outcome: 'failed' }), 1);
    assert.equal(grew('turns_total', { ...message, outcome: 'requeued' }), 0);
    assert.equal(grew('turn_queue_wait_seconds_count', message), 2);
    assert.equal(grew('turns_resumed_total', message), 0);
    assert.match(after, /# TYPE turn_duration_seconds histogram/);
    assert.match(after, /turn_queue_wait_seconds_bucket\{le="600",kind="message"\} 2/);
  } finally {
    await t.close();
  }
});

test('the queue: jobs running and queued in the deployment, runs on this instance, and a wait in line as long as the turn ahead', async () => {
  const t = await startTestApp();
  try {
    const u = await t.userWithAgent();
    const noWait = { Prefer: 'wait=0' };
    assert.equal((await send(t, u, { text: '!sleep 800 first' }, noWait)).statusCode, 202);
    assert.equal((await send(t, u, { text: 'second, behind it' }, noWait)).statusCode, 202); // one turn at a time per agent
    const busy = await scrape(t);
    assert.equal(sample(busy, 'jobs_open', { status: 'running' }), 1, busy);
    assert.equal(sample(busy, 'jobs_open', { status: 'queued' }), 1, busy);
    assert.equal(sample(busy, 'turns_running', {}), 1, busy);

    await queueDrained(t);
    const idle = await scrapeUntil(t, (page) => sample(page, 'turns_total', { ...message, outcome: 'done' }) === 2, 'both runs done');
    assert.match(idle, /^jobs_open\{status="running"\} 0$/m);
    assert.match(idle, /^jobs_open\{status="queued"\} 0$/m);
    assert.equal(sample(idle, 'turns_running', {}), 0);
    // The second message waited for the first one's 800 ms: its time in line says so.
    assert.ok(sample(idle, 'turn_queue_wait_seconds_sum', message) >= 0.6, idle);
  } finally {
    await t.close();
  }
});

test('a run cut off by a shutdown counts as requeued, and its next run as resumed', async () => {
  const first = await startTestApp();
  let next: TestApp | undefined;
  try {
    const u = await first.userWithAgent();
    assert.equal((await send(first, u, { text: '!sleep 600000 long' }, { Prefer: 'wait=0' })).statusCode, 202);
    await scrapeUntil(first, (page) => sample(page, 'turns_running', {}) === 1, 'the turn running');
    await first.runtime.engine.stop(0); // the grace period over at once: the turn is given back
    const stopped = await scrape(first);
    assert.equal(sample(stopped, 'turns_total', { ...message, outcome: 'requeued' }), 1, stopped);
    assert.equal(sample(stopped, 'turn_duration_seconds_count', message), 0, 'a run that wrote no outcome is not timed');
    assert.equal(sample(stopped, 'jobs_open', { status: 'queued' }), 1, stopped);

    next = await first.restart();
    const resumed = await scrapeUntil(next, (page) => sample(page, 'turns_running', {}) === 1, 'the turn taken up again');
    assert.equal(sample(resumed, 'turns_resumed_total', message), 1, resumed);
    assert.equal(sample(resumed, 'turn_queue_wait_seconds_count', message), 0, 'time in line is a first run\'s');
    await next.runtime.engine.stop(0);
  } finally {
    await (next ?? first).close();
  }
});

test('while the database does not answer, a scrape is answered at once, leaving out the deployment\'s queue', { skip: TEST_DB !== 'postgres' && 'PostgreSQL pass only', timeout: 60_000 }, async () => {
  const database = await freshDatabase();
  const { proxy, url } = await proxyInFrontOf(database.url);
  const t = await startTestApp({}, { database: { ...database, url }, dropDatabaseAtClose: true });
  try {
    assert.match(await scrape(t), /^jobs_open\{status="queued"\} 0$/m);
    proxy.freeze();
    const startedAt = Date.now();
    const frozen = await scrape(t);
    assert.ok(Date.now() - startedAt < 5_000, 'answered without waiting for the database');
    assert.doesNotMatch(frozen, /^jobs_open\{/m, 'no stale count');
    assert.match(frozen, /^turns_running 0$/m, 'what the instance knows itself is still there');
    proxy.thaw();
    assert.match(await scrape(t), /^jobs_open\{status="queued"\} 0$/m);
  } finally {
    proxy.thaw();
    await t.close();
    await proxy.close();
  }
});

test('an observer that throws stops neither a turn nor the engine', async () => {
  const t = await startTestApp();
  try {
    const u = await t.userWithAgent();
    let told = 0;
    const stop = t.runtime.engine.observe({
      started() { told++; throw new Error('a broken observer, at the start'); },
      ended() { told++; throw new Error('a broken observer, at the end'); },
    });
    try {
      for (const text of ['first', 'second']) {
        const res = await send(t, u, { text });
        assert.equal(res.statusCode, 200, res.body);
        assert.equal(res.json().reply, `You said: ${text}`);
      }
      await queueDrained(t);
      // The reply can reach its request (and the queue read empty) before the run's end is told
      // (on PostgreSQL the wake-up may come through the bus first): wait for it, bounded.
      for (const giveUpAt = Date.now() + 5000; told < 4 && Date.now() < giveUpAt;) await new Promise((resolve) => setTimeout(resolve, 10));
      assert.equal(told, 4, 'told of both runs, start and end');
      const page = await scrape(t);
      assert.equal(sample(page, 'turns_total', { ...message, outcome: 'done' }), 2, 'the metrics go on counting');
    } finally {
      stop();
    }
  } finally {
    await t.close();
  }
});
