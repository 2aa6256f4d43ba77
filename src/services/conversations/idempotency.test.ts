/**
 * An Idempotency-Key's life, on a clock the test sets: kept (a retry replays, another body is
 * refused) for its whole time to live, also long after its request was accepted; forgotten after.
 * And a first request that stalls before it is accepted, long enough to be taken for abandoned,
 * and a retry that takes the key over: exactly one turn, whatever order they finish in
 * (PostgreSQL only: there a row lock held by another connection stalls the first request's
 * accepting transaction without stalling the whole process).
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import pg from 'pg';
import { Problem } from '../../domain/problems.ts';
import { startTestApp, TEST_DB, TEST_PG_URL, type TestApp } from '../../testing/harness.ts';
import { ConversationsService } from './index.ts';

const skip = TEST_DB === 'postgres' ? false : 'PostgreSQL pass only';

let t: TestApp;
before(async () => { t = await startTestApp({ waitCeilingMs: 5000 }); });
after(async () => { await t?.close(); });

test('an accepted key is kept for its whole time to live, not only while it might be abandoned, then forgotten', async () => {
  const u = await t.userWithAgent();
  const { store, engine, services } = t.runtime;
  const ttlMs = 24 * 3_600_000;
  const clock = { now: store.clock.now() };
  const conversations = new ConversationsService({
    store: { ...store, clock: { now: () => clock.now } }, engine, agents: services.agents,
    waitCeilingMs: 5000, duplicateWindowMs: 0, idempotencyTtlMs: ttlMs, pendingAbandonedAfterMs: 30_000,
  });
  const message = { userId: u.id, channel: 'api', text: 'book the flight', agentId: u.agentId, idempotencyKey: 'trip-7' };
  const t0 = clock.now;
  const first = await conversations.submit(message);
  assert.equal(first.status, 'completed');
  const userTurns = async () => Number((await store.db.selectFrom('turns').select((eb) => eb.fn.countAll<number>().as('n'))
    .where('text', '=', 'book the flight').where('session_id', '=', first.session_id).executeTakeFirstOrThrow()).n);

  for (const later of [31_000, 3_600_000, ttlMs - 1]) {
    clock.now = t0 + later;
    const retry = await conversations.submit(message);
    assert.deepEqual(retry, first, `a retry ${later} ms later replays the first outcome`);
    await assert.rejects(conversations.submit({ ...message, text: 'book a train' }), { code: 'idempotency_key_reused' }, `${later} ms later`);
  }
  assert.equal(await userTurns(), 1, 'no retry started a turn');

  clock.now = t0 + ttlMs + 1;
  const past = await conversations.submit({ ...message, text: 'book a train' });
  assert.equal(past.status, 'completed');
  assert.notEqual(past.session_id, first.session_id, 'past its time to live the key starts a new message');
});

test('a stalled first request whose key a retry took over adds no second turn', { skip }, async () => {
  const u = await t.userWithAgent();
  const { store, engine, services } = t.runtime;
  const conversations = new ConversationsService({
    store, engine, agents: services.agents, waitCeilingMs: 5000, duplicateWindowMs: 0, idempotencyTtlMs: 3_600_000,
    pendingAbandonedAfterMs: 200,
  });
  const first = await conversations.submit({ userId: u.id, channel: 'api', text: 'start', agentId: u.agentId });

  // Another connection holds the session row: appending a turn to it waits.
  const blocker = new pg.Client({ connectionString: TEST_PG_URL });
  await blocker.connect();
  try {
    await blocker.query(`set search_path to ${t.database.pgSchema}`);
    await blocker.query('begin');
    await blocker.query('select id from sessions where id = $1 for update', [first.session_id]);

    const message = { userId: u.id, channel: 'api', text: 'exactly once', sessionId: first.session_id, idempotencyKey: 'stall-1' };
    const stalled = conversations.submit(message).then((r) => r, (e: unknown) => e);
    await new Promise((resolve) => setTimeout(resolve, 400)); // its pending record now looks abandoned
    const retry = conversations.submit(message).then((r) => r, (e: unknown) => e);
    await new Promise((resolve) => setTimeout(resolve, 100));
    await blocker.query('commit');

    const outcomes = await Promise.all([stalled, retry]);
    const refused = outcomes.filter((o) => o instanceof Problem);
    assert.equal(refused.length, 1, 'one of the two is refused');
    assert.equal((refused[0] as Problem).code, 'idempotency_key_in_use');
    assert.ok(outcomes.some((o) => !(o instanceof Problem) && (o as { status: string }).status === 'completed'));
  } finally {
    await blocker.end();
  }
  const turns = await store.db.selectFrom('turns').select(['role', 'text']).where('session_id', '=', first.session_id).orderBy('ts').execute();
  assert.deepEqual(turns.map((turn) => turn.text), ['start', 'You said: start', 'exactly once', 'You said: exactly once']);
  // The key now answers with the one turn it stands for.
  const again = await conversations.submit({ userId: u.id, channel: 'api', text: 'exactly once', sessionId: first.session_id, idempotencyKey: 'stall-1' });
  assert.equal(again.reply, 'You said: exactly once');
});
