import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { DatabaseSync } from 'node:sqlite';
import { send, transcript } from '../testing/conversation.ts';
import { API, startTestApp, TEST_DB, type TestApp } from '../testing/harness.ts';
import { compiledSqliteStatements } from './prepared.ts';

/**
 * Every prepared statement the hot paths run (a send, a turn, a poll, the chat's pages) finds
 * its rows through an index on SQLite: none reads the whole of a table that grows with use. A
 * statement whose condition stops matching its index still gives the right answer, so only its
 * plan shows the mistake (one such statement made each poll read every job ever run).
 */
const GROWING_TABLES = ['turns', 'jobs', 'sessions', 'recent_messages', 'idempotency_keys', 'missions', 'actions', 'questions', 'audit_log'];
// Partial indexes over unfinished work only: scanning one reads what is open, not history.
const BOUNDED_INDEXES = ['jobs_queued', 'jobs_open_by_agent', 'jobs_open_by_session'];

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

  const statements = [...compiledSqliteStatements()];
  assert.ok(statements.length >= 10, `the paths above ran ${statements.length} prepared statements`);
  const file = t.database.url.slice('sqlite:'.length);
  const db = new DatabaseSync(file, { readOnly: true });
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
  assert.deepEqual(fullReads, []);
});
