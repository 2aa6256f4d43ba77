import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { send } from '../testing/conversation.ts';
import { loadConfig } from '../config.ts';
import { allEvents } from '../testing/feed.ts';
import { startTestApp, TEST_DB, withTestApp, type TestApp } from '../testing/harness.ts';
import { actionState, draftAction, unique } from '../testing/missions.ts';
import { PostgresRateLimiter } from '../ratelimit/postgres.ts';
import { WINDOW_MS } from '../ratelimit/rate-limiter.ts';

let t: TestApp;
before(async () => { t = await startTestApp({ duplicateWindowMs: 10_000 }); });
after(async () => { await t.close(); });

test('expired idempotency records and duplicate-window claims are deleted; fresh ones stay', async () => {
  const u = await t.userWithAgent();
  await send(t, u, { text: 'kept for a day' }, { 'Idempotency-Key': 'k1' });
  await send(t, u, { text: 'claims the window' });
  const { housekeeping } = t.runtime.services;
  const now = await housekeeping.runOnce();
  assert.deepEqual(now, { idempotencyKeys: 0, recentMessages: 0, rateLimitRows: 0, webSessions: 0, loginAttempts: 0, events: 0, webhookDeliveries: 0, telegramUpdates: 0, orphansClosed: 0, actionsFailed: 0, missionsSettled: 0 });
  const later = await housekeeping.runOnce(Date.now() + 25 * 3_600_000);
  assert.deepEqual(later, { idempotencyKeys: 1, recentMessages: 2, rateLimitRows: 0, webSessions: 0, loginAttempts: 0, events: 0, webhookDeliveries: 0, telegramUpdates: 0, orphansClosed: 0, actionsFailed: 0, missionsSettled: 0 },
    'the keyed message claimed the window too');
  // After the window the same text is a new message again.
  const again = await send(t, u, { text: 'claims the window' });
  assert.equal(again.json().status, 'completed');
});

test('events older than EVENT_RETENTION_HOURS are deleted by the sweep; younger ones stay', async () => {
  await withTestApp(async (app) => {
    const u = await app.userWithAgent();
    const first = (await send(app, u, { text: 'to be purged' })).json();
    await send(app, u, { text: 'this one too', session_id: first.session_id });
    assert.equal((await allEvents(app, u)).length, 2);
    const { housekeeping } = app.runtime.services;
    const hour = 3_600_000;
    assert.equal((await housekeeping.runOnce(Date.now() + 2 * hour - 60_000)).events, 0, 'not two hours old yet');
    assert.equal((await allEvents(app, u)).length, 2);
    assert.equal((await housekeeping.runOnce(Date.now() + 2 * hour + 60_000)).events, 2);
    assert.deepEqual(await allEvents(app, u), []);
    // The feed goes on with what comes next.
    const later = (await send(app, u, { text: 'kept', session_id: first.session_id })).json();
    assert.deepEqual((await allEvents(app, u)).map((e) => e.data), [{ text: 'You said: kept', ts: later.reply_ts }]);
  }, { eventRetentionMs: loadConfig({ EVENT_RETENTION_HOURS: '2' }).eventRetentionMs });
});

test('finished webhook deliveries older than EVENT_RETENTION_HOURS are deleted by the sweep; younger ones, and pending ones of any age, stay', async () => {
  await withTestApp(async (app) => {
    const { db } = app.runtime.store;
    const hour = 3_600_000;
    const made = new Date(Date.now() - hour).toISOString();
    // An endpoint that does not exist: the worker claims nothing of it, so the rows stay as written.
    const delivery = (state: 'pending' | 'delivered' | 'failed', eventId: string) => ({
      endpoint_id: 'whk_purged', event_id: eventId, event_type: 'turn.completed', payload: '{}', state, attempts: state === 'pending' ? 0 : 1,
      next_attempt_at: made, created_at: made, finished_at: state === 'pending' ? null : made,
    });
    await db.insertInto('webhook_deliveries').values([delivery('delivered', 'evt_1'), delivery('failed', 'evt_2'), delivery('pending', 'evt_3')]).execute();
    const left = async () => (await db.selectFrom('webhook_deliveries').select('event_id').where('endpoint_id', '=', 'whk_purged').orderBy('event_id').execute())
      .map((row) => row.event_id);
    const { housekeeping } = app.runtime.services;
    assert.equal((await housekeeping.runOnce(Date.now() + hour - 60_000)).webhookDeliveries, 0, 'not two hours old yet');
    assert.deepEqual(await left(), ['evt_1', 'evt_2', 'evt_3']);
    assert.equal((await housekeeping.runOnce(Date.now() + hour + 60_000)).webhookDeliveries, 2);
    assert.deepEqual(await left(), ['evt_3'], 'a delivery still to be made is never deleted');
  }, { eventRetentionMs: loadConfig({ EVENT_RETENTION_HOURS: '2' }).eventRetentionMs });
});

test('handled Telegram updates are forgotten a day after they came (by the sweep\'s clock); pending ones stay', async () => {
  await withTestApp(async (app) => {
    const { telegramRelay, housekeeping } = app.runtime.services;
    await telegramRelay.receive([{ update_id: 7001 }, { update_id: 7002 }]);
    await telegramRelay.updateDone(7001);
    const day = 24 * 3_600_000;
    assert.equal((await housekeeping.runOnce(Date.now() + day - 60_000)).telegramUpdates, 0, 'not a day old yet');
    assert.equal((await housekeeping.runOnce(Date.now() + day + 60_000)).telegramUpdates, 1);
    const left = await app.runtime.store.db.selectFrom('telegram_updates').select('update_id').execute();
    assert.deepEqual(left.map((row) => Number(row.update_id)), [7002], 'an update not handled yet is kept');
  });
});

test('web app sessions that are over (idle too long, or past their end) are deleted by the sweep, with nobody logging in; live ones stay', async () => {
  const { webSessions, housekeeping } = t.runtime.services;
  const u = await t.user();
  const idle = await webSessions.create(u.id);
  const live = await webSessions.create(u.id);
  const ended = await webSessions.create(u.id, new Date(Date.now() - 8 * 24 * 3_600_000)); // a week's end passed, seen just now
  await webSessions.setLastSeen(ended.token, new Date());
  await webSessions.setLastSeen(idle.token, new Date(Date.now() - (t.runtime.config.webSessionIdleMinutes + 1) * 60_000));
  const rows = () => t.runtime.store.db.selectFrom('web_sessions').select('id').where('user_id', '=', u.id).execute();
  assert.equal((await rows()).length, 3);

  const swept = await housekeeping.runOnce();
  assert.equal(swept.webSessions, 2);
  assert.equal((await rows()).length, 1);
  assert.ok(await webSessions.resolve(live.token), 'the live session still signs its person in');
});

test('log-in attempts out of their window are deleted by the sweep, with no attempt after them', async () => {
  const { loginThrottle, housekeeping } = t.runtime.services;
  const started = await loginThrottle.beginLogin('swept@example.test', '192.0.2.33');
  assert.ok('attempt' in started);
  const rows = () => t.runtime.store.db.selectFrom('login_attempts').select('attempt').where('attempt', '=', started.attempt.id).execute();
  assert.equal((await housekeeping.runOnce()).loginAttempts, 0);
  assert.equal((await rows()).length, 2, 'counted against the account and the address');
  assert.equal((await housekeeping.runOnce(Date.now() + 16 * 60_000)).loginAttempts, 2);
  assert.deepEqual(await rows(), []);
});

test('the periodic sweep closes orphaned missions by itself, with nobody listing or deciding', async () => {
  const u = await t.userWithAgent();
  const drafted = await draftAction(t, u, 'email', unique('orphaned by a deleted session'));
  const { db } = t.runtime.store;
  await db.deleteFrom('sessions').where('id', '=', drafted.sessionId).execute();
  const state = () => actionState(t, drafted.operationId);
  assert.deepEqual(await state(), { action: 'pending', mission: 'waiting' });

  const { housekeeping } = t.runtime.services;
  await housekeeping.stop(); // the runtime's timer runs every minute; this one every 50 ms
  const errors: unknown[] = [];
  housekeeping.start(50, (error) => errors.push(error));
  try {
    for (let i = 0; i < 200 && (await state()).mission !== 'closed'; i++) await new Promise((resolve) => setTimeout(resolve, 25));
  } finally {
    await housekeeping.stop();
  }
  assert.deepEqual(await state(), { action: 'closed', mission: 'closed' });
  assert.deepEqual(errors, []);
});

test('on PostgreSQL, the rate-limit rows of keys idle for a whole window are deleted', { skip: TEST_DB !== 'postgres' }, async () => {
  // A key last used five windows ago, on the shared log every instance counts in.
  const past = new PostgresRateLimiter(t.runtime.store.pgPool!, { now: () => Date.now() - 5 * WINDOW_MS });
  await past.take('idle-key', 3);
  const swept = await t.runtime.services.housekeeping.runOnce();
  assert.equal(swept.rateLimitRows, 1);
});

test('on PostgreSQL, a sweep held up is never run twice at once, and stop() waits for it to end', { skip: TEST_DB !== 'postgres', timeout: 20_000 }, async () => {
  const pool = t.runtime.store.pgPool!;
  const { housekeeping } = t.runtime.services;
  await housekeeping.stop();
  // Another session holds the first table the sweep deletes from, so the sweep waits on it.
  const blocker = await pool.connect();
  const observer = await pool.connect(); // its own connection: overlapping sweeps could take every other one
  await blocker.query('begin');
  await blocker.query('lock table idempotency_keys in access exclusive mode');
  const waiting = async () => Number((await observer.query(
    "select count(*) as n from pg_locks where not granted and relation = 'idempotency_keys'::regclass")).rows[0].n);
  let stopped = false;
  try {
    housekeeping.start(5);
    for (let i = 0; i < 200 && (await waiting()) === 0; i++) await new Promise((resolve) => setTimeout(resolve, 10));
    await new Promise((resolve) => setTimeout(resolve, 100)); // twenty more ticks
    assert.equal(await waiting(), 1, 'one sweep waits; the ticks behind it started none');
    const stopping = housekeeping.stop().then(() => { stopped = true; });
    await new Promise((resolve) => setTimeout(resolve, 100));
    assert.equal(stopped, false, 'stop() waits for the sweep under way');
    await blocker.query('commit');
    await stopping;
    assert.equal(await waiting(), 0);
  } finally {
    if (!stopped) await blocker.query('rollback').catch(() => {});
    blocker.release();
    observer.release();
  }
});
