import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { DatabaseSync } from 'node:sqlite';
import { send, transcript } from '../testing/conversation.ts';
import { API, startTestApp, TEST_DB, type TestApp } from '../testing/harness.ts';
import { sqliteStatementsSeen } from './node-sqlite-adapter.ts';
import { requeueAllRunning, requeueExpired } from '../engine/queue-sql.ts';
import { WebClient } from '../testing/web-client.ts';
import { answerOne, askQuestion, decideOne, draftAction, listActions, listQuestions, queueDrained, unique } from '../testing/missions.ts';

/**
 * Every statement the hot paths (a send, a turn, a poll) and the background work run finds its
 * rows through an index on SQLite: none reads the whole of a table that grows with use. A
 * statement whose condition stops matching its index still gives the right answer, so only its
 * plan shows the mistake (one such statement made each poll read every job ever run).
 */
const GROWING_TABLES = ['turns', 'jobs', 'sessions', 'recent_messages', 'idempotency_keys', 'missions', 'actions', 'questions', 'audit_log', 'login_attempts', 'webhook_deliveries'];
// Partial indexes over unfinished work only: scanning one reads what is open, not history.
const BOUNDED_INDEXES = ['jobs_queued', 'jobs_line', 'jobs_open_by_session'];

let t: TestApp;
before(async () => { t = await startTestApp(); });
after(async () => { await t.close(); });

test('the statements of sending, running a turn and reading a transcript use an index', { skip: TEST_DB !== 'sqlite' && 'query plans of SQLite' }, async () => {
  const u = await t.userWithAgent();
  const first = (await send(t, u, { text: 'plan one' })).json();
  assert.equal(first.status, 'completed');
  await send(t, u, { text: 'plan two', session_id: first.session_id });
  await send(t, u, { text: 'plan three' }, { 'Idempotency-Key': 'plans-1' });
  await send(t, u, { text: 'plan one' }); // a duplicate within the window
  assert.equal((await transcript(t, u, first.session_id)).statusCode, 200);
  assert.equal((await transcript(t, u, first.session_id, `after=${encodeURIComponent(first.message_ts)}&limit=1`)).statusCode, 200);
  assert.equal((await t.inject({ method: 'GET', url: `${API}/agents`, headers: u.auth })).statusCode, 200);
  const { conversations } = t.runtime.services;
  await conversations.latestTranscript(u.id, first.session_id);
  await conversations.latestTranscript(u.id, first.session_id, { before: first.message_ts });

  const statements = statementsRunSoFar();
  assert.ok(statements.length >= 10, `the paths above ran ${statements.length} statements`);
  assert.deepEqual(fullReadsAmong(statements), []);
});

test('the statements of background work (requeues, housekeeping with its purge of webhook deliveries, the missions sweep, the metrics\' queue count) and of listing and settling actions and questions use an index', { skip: TEST_DB !== 'sqlite' && 'query plans of SQLite' }, async () => {
  const owner = await t.userWithAgent({ plan: 'pro' });
  const drafted = await draftAction(t, owner, 'payment', unique('Plan check'));
  const asked = await askQuestion(t, owner, 'text', unique('Plan check?'));
  assert.equal((await listActions(t, owner)).statusCode, 200);
  assert.equal((await listQuestions(t, owner)).statusCode, 200);
  // A later page: the cursor's own row, then the rows after it.
  assert.equal((await listActions(t, owner, `?after=${drafted.operationId}&limit=10`)).statusCode, 200);
  assert.equal((await listQuestions(t, owner, `?after=${asked.requestId}&limit=10`)).statusCode, 200);
  assert.equal((await decideOne(t, owner, { operation_id: drafted.operationId, decision: 'approve' })).outcome, 'approved');
  assert.equal((await answerOne(t, owner, asked.requestId, 'an answer')).accepted, true);
  await queueDrained(t);
  const { db } = t.runtime.store;
  await requeueExpired(db, t.runtime.store.clock.now());
  await requeueAllRunning(db);
  await t.runtime.services.housekeeping.runOnce();
  await t.runtime.engine.openJobs(); // read at every scrape of /metrics

  const statements = statementsRunSoFar();
  assert.ok(statements.length >= 40, `the paths above ran ${statements.length} statements`);
  assert.ok(statements.some((sql) => /^delete from "webhook_deliveries" where "state" in /.test(sql)), 'the purge of finished webhook deliveries ran');
  // The duplicate window's table holds only the last few seconds of messages: its expiry may read it.
  const windowOnly = (sql: string) => /^delete from "recent_messages" where "created_at" < \?$/.test(sql);
  assert.deepEqual(fullReadsAmong(statements.filter((sql) => !windowOnly(sql))), []);
});

test('listing a person\'s actions and questions reads that person\'s, not every live mission or open question', { skip: TEST_DB !== 'sqlite' && 'query plans of SQLite' }, async () => {
  const owner = await t.userWithAgent({ plan: 'pro' });
  await draftAction(t, owner, 'payment', unique('Plan check'));
  await askQuestion(t, owner, 'text', unique('Plan check?'));
  assert.equal((await listActions(t, owner)).statusCode, 200);
  assert.equal((await listQuestions(t, owner)).statusCode, 200);

  // The statements that name a person: a search by status alone there reads every account's.
  const personal = statementsRunSoFar().filter((sql) => /"(?:owner_user_id|asked_of)" = \?/.test(sql));
  assert.ok(personal.length >= 3, `the lists ran ${personal.length} statements that name a person`);
  const db = new DatabaseSync(t.database.url.slice('sqlite:'.length), { readOnly: true });
  try {
    const byStatusAlone = personal.flatMap((sql) => (db.prepare(`explain query plan ${sql}`).all() as Array<{ detail: string }>)
      .filter((row) => /^SEARCH (?:missions|questions|actions) USING (?:COVERING )?INDEX \w+ \(status=\?\)$/.test(row.detail))
      .map((row) => `${row.detail}  ←  ${sql}`));
    assert.deepEqual(byStatusAlone, []);
  } finally {
    db.close();
  }
});

test('the statements of the log-in and sign-up throttle use an index (an attacker can fill its table)', { skip: TEST_DB !== 'sqlite' && 'query plans of SQLite' }, async () => {
  const web = new WebClient(t);
  const email = await web.signup();
  await web.post('/logout');
  await web.get('/login');
  assert.equal((await web.post('/login', { email, password: 'wrong password' })).statusCode, 401);
  assert.equal((await web.post('/login', { email, password: 'correct horse battery' })).statusCode, 303);

  const throttle = statementsRunSoFar().filter((sql) => sql.includes('"login_attempts"'));
  assert.ok(throttle.some((sql) => /^delete from "login_attempts" where .*"attempt"/.test(sql)), `a success was forgiven: ${throttle.join('\n')}`);
  assert.deepEqual(fullReadsAmong(throttle), []);
});

/** Every query this test process has run so far (schema changes and transaction control left out). */
const statementsRunSoFar = () => [...sqliteStatementsSeen()]
  .filter((sql) => !/^\s*(?:create|alter|drop|pragma|begin|commit|rollback|savepoint|release)\b/i.test(sql));

/** The statements whose plan reads a whole growing table (not one of the bounded partial indexes). */
function fullReadsAmong(statements: Iterable<string>): string[] {
  const db = new DatabaseSync(t.database.url.slice('sqlite:'.length), { readOnly: true });
  const fullReads: string[] = [];
  try {
    for (const sql of statements) {
      for (const row of db.prepare(`explain query plan ${sql}`).all() as Array<{ detail: string }>) {
        const scan = /^SCAN (\w+)(?: USING (?:COVERING )?INDEX (\w+))?/.exec(row.detail);
        if (scan && GROWING_TABLES.includes(scan[1]!) && !BOUNDED_INDEXES.includes(scan[2] ?? '')) fullReads.push(`${row.detail}  ←  ${sql}`);
      }
    }
  } finally {
    db.close();
  }
  return fullReads;
}
