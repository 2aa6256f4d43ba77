/**
 * The upgrade path: a database made and used by an earlier release, holding real data, opened by
 * this one. The service promises never to lose a message, so every row an earlier level wrote must
 * come through its remaining migrations and read as it did, and the work it left half done (queued
 * and running jobs, waiting actions and questions) must be finished once.
 *
 * Each database is built with this release's own migrations stopped at an earlier one (Kysely's
 * migrateTo), then filled straight through SQL with rows of the shapes that level's code wrote
 * (read from a database the 0.1.0 build made and used): ids without the time prefix before
 * migration 003, password hashes that build made, job payloads, digests. The real server process
 * then opens it, so the migrations run as they do in production.
 */
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { test } from 'node:test';
import { Kysely, SqliteDialect, sql, type Insertable } from 'kysely';
import { Migrator } from 'kysely/migration';
import pg from 'pg';
import { randomBase62 } from '../domain/ids.ts';
import { createRuntime } from '../runtime.ts';
import { runCli } from '../testing/cli.ts';
import { API, databaseEnv, freshDatabase, TEST_DB, TEST_PG_URL, testConfig, type TestDatabase } from '../testing/harness.ts';
import { startServerProcess, type ServerProcess } from '../testing/server-process.ts';
import { openNodeSqlite } from './node-sqlite-adapter.ts';
import { CurrentSchemaPostgresDialect, NamedStatementClient } from './postgres-dialect.ts';
import type { DB } from './schema.ts';
import { migrationsFor, openStore } from './store.ts';

/**
 * The levels an existing database is upgraded from: the 0.1.0 release (only 001; every later
 * migration then runs over its data), and the level just before each migration that changes
 * tables already holding rows: 004 indexes missions, actions, questions and idempotency records;
 * 005 replaces the index the queue reads; 006 indexes missions by owner; 007 replaces the index of
 * memberships. (002, 003 and 008 only add tables.)
 */
const LEVELS = ['001_initial', '003_instance_secrets', '004_history_indexes', '005_jobs_line', '006_missions_owner'] as const;

const PASSWORD = 'a long password';
// Made by the 0.1.0 build (SCRYPT_COST_LOG2=10) for PASSWORD: the stored format this release must still read.
const PASSWORD_HASHES = {
  alice: 'scrypt$10$8$1$e13tI9BRa0iNGVQe1POqUg==$BdcrMOYROn0e6Oi3f9tptN4VXo5BPhriOiy6OBVZeg0=',
  bob: 'scrypt$10$8$1$4zm6ZtkL++jU0h64kfVRhA==$t6ww1dW5bEjnPreJyW7F9KEh13pVGvCfGXoLUi0rp9M=',
};

const sha256Hex = (text: string) => createHash('sha256').update(text).digest('hex');
const levelNumber = (level: string) => Number(level.slice(0, 3));

/** A Kysely handle on the database with no migration run, as an older build's store would hold. */
function rawDatabase(database: TestDatabase): Kysely<DB> {
  if (TEST_DB === 'postgres') {
    const pool = new pg.Pool({ Client: NamedStatementClient, connectionString: TEST_PG_URL, options: `-c search_path=${database.pgSchema}`, max: 1 });
    return new Kysely<DB>({ dialect: new CurrentSchemaPostgresDialect({ pool }) });
  }
  return new Kysely<DB>({ dialect: new SqliteDialect({ database: openNodeSqlite(database.url.slice('sqlite:'.length)) }) });
}

async function migrateTo(database: TestDatabase, level: string): Promise<void> {
  if (database.pgSchema) {
    const admin = new pg.Client({ connectionString: TEST_PG_URL });
    await admin.connect();
    await admin.query(`create schema ${database.pgSchema}`);
    await admin.end();
  }
  const db = rawDatabase(database);
  try {
    const migrator = new Migrator({ db, provider: { getMigrations: async () => migrationsFor(TEST_DB) } });
    const { error } = await migrator.migrateTo(level);
    if (error) throw error;
  } finally {
    await db.destroy();
  }
}

type Rows = { [T in keyof DB]?: Insertable<DB[T]>[] };

/** What an earlier level left behind, written as its code wrote it; the tokens to call the API with. */
async function fillAsLevel(database: TestDatabase, level: string) {
  const n = levelNumber(level);
  // Ids led with their creation time from the build that brought migration 003 on.
  const id = (prefix: string) => prefix + (n >= 3 ? randomBase62(30) : randomBase62(22));
  const now = Date.now();
  const iso = (offsetMs: number) => new Date(now + offsetMs).toISOString();
  // A turn's ts: microseconds, strictly increasing within a session.
  const ts = (offsetMs: number, micros: number) => `${iso(offsetMs).slice(0, 19)}.${String(((now + offsetMs) % 1000) * 1000 + micros).padStart(6, '0')}Z`;
  const HOUR = 3_600_000;

  const alice = id('usr_'), bob = id('usr_');
  const aliceSpace = id('wsp_'), bobSpace = id('wsp_');
  const agentOne = id('agt_'), agentTwo = id('agt_');
  const tokens: Record<string, string> = {};
  const rows: Rows = {
    users: [
      { id: alice, email: 'alice@example.test', password_hash: PASSWORD_HASHES.alice, plan: 'pro', created_at: iso(-3 * HOUR) },
      { id: bob, email: 'bob@example.test', password_hash: PASSWORD_HASHES.bob, plan: 'free', created_at: iso(-3 * HOUR + 1) },
    ],
    workspaces: [
      { id: aliceSpace, name: 'Personal', personal_of: alice, created_at: iso(-3 * HOUR) },
      { id: bobSpace, name: 'Personal', personal_of: bob, created_at: iso(-3 * HOUR + 1) },
    ],
    memberships: [
      { workspace_id: aliceSpace, user_id: alice, role: 'owner', created_at: iso(-3 * HOUR) },
      { workspace_id: bobSpace, user_id: bob, role: 'owner', created_at: iso(-3 * HOUR + 1) },
      { workspace_id: aliceSpace, user_id: bob, role: 'member', created_at: iso(-3 * HOUR + 2) },
    ],
    agents: [
      { id: agentOne, workspace_id: aliceSpace, name: 'Agent one', created_by: alice, created_at: iso(-3 * HOUR + 10) },
      { id: agentTwo, workspace_id: aliceSpace, name: 'Agent two', created_by: alice, created_at: iso(-3 * HOUR + 11) },
    ],
    api_keys: [],
    audit_log: [],
  };

  const key = (name: string, userId: string, extra: { status?: 'active' | 'inactive' | 'revoked'; expires_at?: string; revoked_at?: string; rate_limit?: number; last_used_at?: string } = {}) => {
    const keyId = randomBase62(16), secret = randomBase62(43);
    tokens[name] = `ak_${keyId}_${secret}`;
    const created_at = iso(-2 * HOUR + rows.api_keys!.length);
    rows.api_keys!.push({
      id: keyId, user_id: userId, label: name, secret_hash: createHash('sha256').update(secret).digest(), rate_limit: extra.rate_limit ?? 60,
      status: extra.status ?? 'active', expires_at: extra.expires_at ?? null, created_at, revoked_at: extra.revoked_at ?? null, last_used_at: extra.last_used_at ?? null,
    });
    rows.audit_log!.push({ at: created_at, actor_user_id: userId, action: 'key.created', subject_id: keyId,
      details: JSON.stringify({ label: name, rate_limit: extra.rate_limit ?? 60, expires_at: extra.expires_at ?? null }) });
    return keyId;
  };
  key('main', alice, { last_used_at: iso(-HOUR), rate_limit: 10_000 }); // the test polls with it
  key('expiring later', alice, { expires_at: iso(24 * HOUR) });
  key('expired', alice, { expires_at: iso(-HOUR) });
  const revoked = key('revoked', alice, { status: 'revoked', revoked_at: iso(-HOUR) });
  const disabled = key('disabled', alice, { status: 'inactive' });
  key('bob', bob);
  const busy = key('busy', alice, { rate_limit: 3 });
  rows.audit_log!.push(
    { at: iso(-HOUR), actor_user_id: alice, action: 'key.revoked', subject_id: revoked, details: null },
    { at: iso(-HOUR + 1), actor_user_id: null, action: 'key.disabled', subject_id: disabled, details: null }, // by the CLI
  );

  // Session one: a finished conversation that opened missions, then a failure stamped by an
  // instance whose clock ran five minutes ahead (so its ts is later than the present).
  const sessionOne = id('ses_'), sessionTwo = id('ses_');
  const turns: Insertable<DB['turns']>[] = [];
  const jobs: Insertable<DB['jobs']>[] = [];
  let turnId = 0, jobId = 0, micros = 0;
  const exchange = (sessionId: string, agentId: string, text: string, reply: string | null, status: 'done' | 'failed', at: number) => {
    const job = ++jobId;
    const userTurn = ++turnId;
    turns.push({ id: userTurn, session_id: sessionId, role: 'user', text, ts: ts(at, ++micros), error: null, job_id: job });
    let replyTurn: number | null = null;
    if (reply !== null) {
      replyTurn = ++turnId;
      turns.push({ id: replyTurn, session_id: sessionId, role: 'agent', text: reply, ts: ts(at, ++micros), error: status === 'failed' ? 'agent_failed' : null, job_id: job });
    }
    jobs.push({ id: job, agent_id: agentId, session_id: sessionId, user_id: alice, kind: 'message', payload: JSON.stringify({ kind: 'message', text }),
      status, attempts: 1, lease_owner: null, lease_expires_at: null, user_turn_id: userTurn, reply_turn_id: replyTurn,
      created_at: iso(at), started_at: iso(at), finished_at: iso(at + 1) });
    return job;
  };
  const missions: Insertable<DB['missions']>[] = [];
  const actions: Insertable<DB['actions']>[] = [];
  const questions: Insertable<DB['questions']>[] = [];

  exchange(sessionOne, agentOne, 'hello one', 'You said: hello one', 'done', -HOUR);
  exchange(sessionOne, agentOne, 'second', 'You said: second', 'done', -HOUR + 1000);
  const withKey = exchange(sessionOne, agentOne, 'with a key', 'You said: with a key', 'done', -HOUR + 2000);
  const operationId = id('op_'), actionMission = id('msn_');
  exchange(sessionOne, agentOne, '!action send_report Send the report', `I need your permission to run "send_report": Send the report (operation_id ${operationId}). Approve or reject it.`, 'done', -HOUR + 3000);
  missions.push({ id: actionMission, session_id: sessionOne, agent_id: agentOne, owner_user_id: alice, status: 'waiting', created_at: iso(-HOUR + 3000), updated_at: iso(-HOUR + 3000) });
  actions.push({ id: operationId, mission_id: actionMission, session_id: sessionOne, agent_id: agentOne, owner_user_id: alice, kind: 'send_report',
    summary: 'Send the report', details: JSON.stringify({ kind: 'send_report', summary: 'Send the report' }), status: 'pending', decision: null, reason: null,
    created_at: iso(-HOUR + 3000), decided_at: null });
  const question = (asked: string, text: string, answerType: string, at: number, answer: string | null) => {
    const requestId = id('req_'), missionId = id('msn_');
    missions.push({ id: missionId, session_id: sessionOne, agent_id: agentOne, owner_user_id: alice, status: answer === null ? 'waiting' : 'active', created_at: iso(at), updated_at: iso(at + 1) });
    questions.push({ id: requestId, mission_id: missionId, session_id: sessionOne, agent_id: agentOne, owner_user_id: alice, asked_of: asked, text,
      answer_type: answerType, status: answer === null ? 'open' : 'answered', answer, created_at: iso(at), answered_at: answer === null ? null : iso(at + 1) });
    return { requestId, missionId };
  };
  exchange(sessionOne, agentOne, '!ask number How many?', 'Question for you: How many? (answer type number).', 'done', -HOUR + 4000);
  const aliceQuestion = question(alice, 'How many?', 'number', -HOUR + 4000, null);
  exchange(sessionOne, agentOne, '!ask-user bob@example.test text Your name?', 'I asked bob@example.test: Your name?', 'done', -HOUR + 5000);
  const bobQuestion = question(bob, 'Your name?', 'text', -HOUR + 5000, null);
  // Answered just before the old build stopped: its continuation is still queued.
  exchange(sessionOne, agentOne, '!ask number How old?', 'Question for you: How old? (answer type number).', 'done', -HOUR + 6000);
  const answered = question(alice, 'How old?', 'number', -HOUR + 6000, '7');
  const continuation = ++jobId;
  jobs.push({ id: continuation, agent_id: agentOne, session_id: sessionOne, user_id: alice, kind: 'continuation',
    payload: JSON.stringify({ kind: 'question_answered', missionId: answered.missionId, requestId: answered.requestId, answer: '7' }),
    status: 'queued', attempts: 0, lease_owner: null, lease_expires_at: null, user_turn_id: null, reply_turn_id: null, created_at: iso(-HOUR + 6001), started_at: null, finished_at: null });
  exchange(sessionOne, agentOne, '!fail', 'The built-in agent was told to fail (!fail).', 'failed', 5 * 60_000);

  // Session two: a turn running on an instance that died a minute ago, two queued behind it.
  const running = ++jobId;
  for (const [i, text] of ['!sleep 200 slow one', 'queued one', 'queued two'].entries()) {
    const job = i === 0 ? running : ++jobId;
    const userTurn = ++turnId;
    turns.push({ id: userTurn, session_id: sessionTwo, role: 'user', text, ts: ts(-60_000 + i, ++micros), error: null, job_id: job });
    jobs.push({ id: job, agent_id: agentTwo, session_id: sessionTwo, user_id: alice, kind: 'message', payload: JSON.stringify({ kind: 'message', text }),
      status: i === 0 ? 'running' : 'queued', attempts: i === 0 ? 1 : 0, lease_owner: i === 0 ? '4242-oldinstance' : null,
      lease_expires_at: i === 0 ? iso(-45_000) : null, user_turn_id: userTurn, reply_turn_id: null, created_at: iso(-60_000 + i),
      started_at: i === 0 ? iso(-60_000) : null, finished_at: null });
  }
  const lastTs = (sessionId: string) => turns.filter((t) => t.session_id === sessionId).at(-1)!.ts;
  rows.sessions = [
    { id: sessionOne, user_id: alice, agent_id: agentOne, channel: 'api', last_ts: lastTs(sessionOne), created_at: iso(-HOUR) },
    { id: sessionTwo, user_id: alice, agent_id: agentTwo, channel: 'api', last_ts: lastTs(sessionTwo), created_at: iso(-60_000) },
  ];
  rows.turns = turns;
  rows.audit_log!.forEach((row, i) => { row.id = i + 1; });
  rows.jobs = jobs;
  rows.missions = missions;
  rows.actions = actions;
  rows.questions = questions;
  rows.idempotency_keys = [{ user_id: alice, key: 'idem-1', body_hash: sha256Hex(JSON.stringify(['with a key', sessionOne, null])), state: 'accepted',
    session_id: sessionOne, job_id: withKey, created_at: iso(-HOUR + 2000) }];
  rows.recent_messages = [{ user_id: alice, target: sessionTwo, text_hash: sha256Hex('queued two'), session_id: sessionTwo, job_id: jobId, created_at: iso(-30_000) }];
  const webToken = randomBase62(43);
  rows.web_sessions = [{ id: sha256Hex(webToken), user_id: alice, csrf_token: randomBase62(32), created_at: iso(-10 * 60_000), last_seen_at: iso(-60_000), expires_at: iso(24 * HOUR) }];
  if (n >= 3) rows.instance_secrets = [{ name: 'web.sealing-key', value: randomBytes(32).toString('base64'), created_at: iso(-2 * HOUR) }];

  const db = rawDatabase(database);
  try {
    for (const [table, values] of Object.entries(rows) as [keyof DB, Insertable<any>[]][]) {
      if (values.length) await db.insertInto(table).values(values as any).execute();
    }
    // The serial columns' sequences move past the ids written by hand, as inserts by the old build did.
    if (TEST_DB === 'postgres') {
      for (const table of ['turns', 'jobs', 'audit_log']) {
        await sql`select setval(pg_get_serial_sequence(${table}, 'id'), (select max(id) from ${sql.table(table)}))`.execute(db);
      }
    }
    // PostgreSQL from 002 on: the shared rate-limit log, holding a minute used up by the busy key.
    if (TEST_DB === 'postgres' && n >= 2) {
      await sql`insert into rate_limit_windows (key_id, lasts, counts, total, expires_us)
        select ${busy}, array[t], array[3], 3, t + 60000000 from (select floor(extract(epoch from clock_timestamp()) * 1000000)::bigint as t) now`.execute(db);
    }
  } finally {
    await db.destroy();
  }
  return {
    rows, tokens, webToken, alice, bob, agentOne, agentTwo, sessionOne, sessionTwo, operationId, aliceQuestion, bobQuestion, answered,
    continuation, leftUnfinished: jobs.filter((j) => j.status === 'queued' || j.status === 'running').map((j) => j.id!),
  };
}

async function call(server: ServerProcess, token: string, method: string, path: string, body?: unknown, headers: Record<string, string> = {}) {
  const res = await fetch(`${server.url}${API}${path}`, {
    method, headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }), ...headers },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: res.status, body: await res.json() as any };
}

/** A session's whole transcript, walked a page of `limit` turns at a time. */
async function walkTranscript(server: ServerProcess, token: string, sessionId: string, limit: number) {
  const messages: any[] = [];
  let after = '';
  for (;;) {
    const page = await call(server, token, 'GET', `/sessions/${sessionId}/messages?limit=${limit}${after ? `&after=${after}` : ''}`);
    assert.equal(page.status, 200, JSON.stringify(page.body));
    messages.push(...page.body.messages);
    if (!page.body.has_more) return { messages, status: page.body.status };
    after = page.body.messages.at(-1).ts;
  }
}

async function until<T>(what: string, read: () => Promise<T>, done: (value: T) => boolean, timeoutMs = 20_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await read();
    if (done(value)) return value;
    if (Date.now() > deadline) throw new Error(`${what} never happened: ${JSON.stringify(value)}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

const comparable = (row: Record<string, unknown>) =>
  Object.fromEntries(Object.entries(row).map(([k, v]) => [k, Buffer.isBuffer(v) || v instanceof Uint8Array ? Buffer.from(v).toString('hex') : v]));

for (const level of LEVELS) {
  test(`a database left at ${level}, with data in every table, comes through the upgrade whole and its unfinished work is done once`, { timeout: 90_000 }, async () => {
    const database = await freshDatabase();
    let server: ServerProcess | null = null;
    try {
      await migrateTo(database, level);
      const old = await fillAsLevel(database, level);
      const { tokens } = old;
      // The real server opens (and so migrates) it; a wide duplicate window keeps the old claim in it.
      server = await startServerProcess({ ...databaseEnv(database), DUPLICATE_WINDOW_MS: '600000' });

      // Keys: the working ones authenticate, the revoked, expired and disabled ones still refuse.
      for (const name of ['main', 'expiring later', 'bob']) assert.equal((await call(server, tokens[name]!, 'GET', '/agents')).status, 200, name);
      for (const name of ['expired', 'revoked', 'disabled']) {
        const res = await call(server, tokens[name]!, 'GET', '/agents');
        assert.deepEqual([res.status, res.body.code], [401, 'unauthorized'], name);
      }
      const agents = await call(server, tokens.main!, 'GET', '/agents');
      assert.deepEqual(agents.body.agents.map((a: any) => [a.agent_id, a.name]).sort(),
        [[old.agentOne, 'Agent one'], [old.agentTwo, 'Agent two']].sort());
      if (TEST_DB === 'postgres' && levelNumber(level) >= 2) {
        // The busy key's minute, logged before the upgrade, still counts.
        assert.equal((await call(server, tokens.busy!, 'GET', '/agents')).status, 429);
      }

      // The old transcript pages as it was written.
      const oldTurnsOf = (sessionId: string) => old.rows.turns!.filter((t) => t.session_id === sessionId)
        .map((t) => ({ role: t.role, text: t.text, ts: t.ts, ...(t.error ? { error: t.error } : {}) }));
      const pagedBefore = await walkTranscript(server, tokens.main!, old.sessionOne, 2);
      assert.deepEqual(pagedBefore.messages.slice(0, oldTurnsOf(old.sessionOne).length).map((m: any) => ({ role: m.role, text: m.text, ts: m.ts, ...(m.error ? { error: m.error } : {}) })),
        oldTurnsOf(old.sessionOne));

      // A retry of a request the old build accepted under an Idempotency-Key answers as it did; a
      // duplicate of a message it just received is known as one.
      const retried = await call(server, tokens.main!, 'POST', '/messages', { session_id: old.sessionOne, text: 'with a key' }, { 'idempotency-key': 'idem-1' });
      assert.equal(retried.status, 200, JSON.stringify(retried.body));
      assert.deepEqual([retried.body.session_id, retried.body.message_ts, retried.body.reply], [old.sessionOne, old.rows.turns![4]!.ts, 'You said: with a key']);
      const duplicate = await call(server, tokens.main!, 'POST', '/messages', { session_id: old.sessionTwo, text: 'queued two' });
      assert.deepEqual([duplicate.status, duplicate.body.status, duplicate.body.session_id], [200, 'duplicate', old.sessionTwo]);

      // A new message in the old session: its ts follows the old turns', the latest of which is ahead of the clock.
      const fresh = await call(server, tokens.main!, 'POST', '/messages', { session_id: old.sessionOne, text: 'after the upgrade' });
      assert.equal(fresh.status, 200, JSON.stringify(fresh.body));
      assert.ok(fresh.body.message_ts > old.rows.sessions![0]!.last_ts!, `${fresh.body.message_ts} after ${old.rows.sessions![0]!.last_ts}`);

      // What waits lists as it was written, next to what waits since the upgrade (ids of both shapes).
      const drafted = await call(server, tokens.main!, 'POST', '/messages', { session_id: old.sessionOne, text: '!action deploy Ship it' });
      assert.equal(drafted.status, 200);
      const pendingPages: any[] = [];
      let after = '';
      for (let page = 0; page < 5; page++) {
        const res = await call(server, tokens.main!, 'GET', `/actions?limit=1${after ? `&after=${after}` : ''}`);
        pendingPages.push(...res.body.actions);
        if (!res.body.has_more) break;
        after = res.body.actions.at(-1).operation_id;
      }
      assert.equal(pendingPages.length, 2, JSON.stringify(pendingPages));
      const oldAction = pendingPages.find((a) => a.operation_id === old.operationId);
      const oldActionRow = old.rows.actions![0]!;
      assert.deepEqual(oldAction, { operation_id: old.operationId, kind: 'send_report', summary: 'Send the report', details: JSON.parse(oldActionRow.details),
        session_id: old.sessionOne, agent_id: old.agentOne, mission_id: oldActionRow.mission_id, created_at: oldActionRow.created_at });
      const newAction = pendingPages.find((a) => a.operation_id !== old.operationId);
      const aliceQuestions = (await call(server, tokens.main!, 'GET', '/questions')).body.questions;
      assert.deepEqual(aliceQuestions.find((q: any) => q.request_id === old.aliceQuestion.requestId),
        { request_id: old.aliceQuestion.requestId, text: 'How many?', session_id: old.sessionOne, agent_id: old.agentOne, mission_id: old.aliceQuestion.missionId,
          asked_of: old.alice, answer_type: 'number', created_at: old.rows.questions![0]!.created_at });
      const bobQuestions = (await call(server, tokens.bob!, 'GET', '/questions')).body.questions;
      assert.deepEqual(bobQuestions.map((q: any) => q.request_id), [old.bobQuestion.requestId]);

      // ...and settles.
      const decided = await call(server, tokens.main!, 'POST', '/actions/decisions',
        [{ operation_id: old.operationId, decision: 'approve' }, { operation_id: newAction.operation_id, decision: 'approve' }]);
      assert.deepEqual(decided.body.results.map((r: any) => r.ok), [true, true], JSON.stringify(decided.body));
      const answeredNow = await call(server, tokens.main!, 'POST', '/questions/answers', [{ request_id: old.aliceQuestion.requestId, text: '12' }]);
      assert.deepEqual(answeredNow.body.results.map((r: any) => r.accepted), [true], JSON.stringify(answeredNow.body));
      const bobAnswered = await call(server, tokens.bob!, 'POST', '/questions/answers', [{ request_id: old.bobQuestion.requestId, text: 'Bob' }]);
      assert.deepEqual(bobAnswered.body.results.map((r: any) => r.accepted), [true], JSON.stringify(bobAnswered.body));

      // The work the old build left unfinished is done: the running turn of a dead instance, the
      // two queued behind it, the queued continuation; and the continuations just settled.
      const expectedReplies = ['You said: slow one', 'You said: queued one', 'You said: queued two'];
      const sessionTwo = await until('the old queue running', () => walkTranscript(server!, tokens.main!, old.sessionTwo, 200),
        (t) => t.status === 'idle' && t.messages.filter((m: any) => m.role === 'agent').length >= 3);
      assert.deepEqual(sessionTwo.messages.filter((m: any) => m.role === 'agent').map((m: any) => m.text), expectedReplies);
      const continued = ['Noted: 7', 'Noted: 12', 'Noted: Bob', 'Done: Send the report', 'Done: Ship it'];
      const sessionOne = await until('the continuations', () => walkTranscript(server!, tokens.main!, old.sessionOne, 3),
        (t) => t.status === 'idle' && continued.every((text) => t.messages.some((m: any) => m.text === text)));
      for (const text of continued) assert.equal(sessionOne.messages.filter((m: any) => m.text === text).length, 1, text);
      // One ts order through old turns and new, with no ts repeated.
      const stamps = sessionOne.messages.map((m: any) => m.ts);
      for (let i = 1; i < stamps.length; i++) assert.ok(stamps[i - 1] < stamps[i], `ts ${stamps[i - 1]} then ${stamps[i]}`);

      // The web app's session, made before the upgrade, still logs its person in.
      const page = await fetch(`${server.url}/`, { headers: { cookie: `ac_session=${old.webToken}` }, redirect: 'manual' });
      assert.equal(page.status, 200);
      assert.match(await page.text(), /Overview/);

      assert.equal((await server.kill('SIGTERM')).code, 0);
      server = null;

      // Every row written before the upgrade is still there as written (but what the server was
      // asked to change since: keys' last use, finished jobs, settled missions, the session's clock).
      const runtime = await createRuntime({ config: testConfig(database), storeOptions: database.pgSchema ? { pgSchema: database.pgSchema } : {} });
      try {
        const db = runtime.store.db;
        const unchanged: Record<string, { key: string[]; ignore?: string[] }> = {
          users: { key: ['id'] }, workspaces: { key: ['id'] }, memberships: { key: ['workspace_id', 'user_id'] }, agents: { key: ['id'] },
          api_keys: { key: ['id'], ignore: ['last_used_at'] }, audit_log: { key: ['id'] }, turns: { key: ['id'] },
          sessions: { key: ['id'], ignore: ['last_ts'] }, idempotency_keys: { key: ['user_id', 'key'] }, web_sessions: { key: ['id'], ignore: ['last_seen_at'] },
          instance_secrets: { key: ['name'] },
          jobs: { key: ['id'], ignore: ['status', 'attempts', 'lease_owner', 'lease_expires_at', 'reply_turn_id', 'started_at', 'finished_at'] },
          missions: { key: ['id'], ignore: ['status', 'updated_at'] }, actions: { key: ['id'], ignore: ['status', 'decision', 'decided_at'] },
          questions: { key: ['id'], ignore: ['status', 'answer', 'answered_at'] },
        };
        for (const [table, { key, ignore = [] }] of Object.entries(unchanged)) {
          const written = (old.rows[table as keyof DB] ?? []) as Record<string, unknown>[];
          const stored = await db.selectFrom(table as keyof DB).selectAll().execute() as Record<string, unknown>[];
          const keyOf = (row: Record<string, unknown>) => key.map((k) => String(row[k])).join('|');
          const byKey = new Map(stored.map((row) => [keyOf(row), row]));
          for (const row of written) {
            const found = byKey.get(keyOf(row));
            assert.ok(found, `${table} ${keyOf(row)} is gone`);
            const pick = (r: Record<string, unknown>) => comparable(Object.fromEntries(Object.keys(row).filter((k) => !ignore.includes(k)).map((k) => [k, r[k]])));
            assert.deepEqual(pick(found), pick(row), `${table} ${keyOf(row)}`);
          }
        }
        // Each unfinished job ran to its end once: one reply each, no job doubled.
        const jobs = await db.selectFrom('jobs').select(['id', 'status']).where('id', 'in', old.leftUnfinished).orderBy('id').execute();
        assert.deepEqual(jobs.map((j) => j.status), ['done', 'done', 'done', 'done']);
        const replies = await db.selectFrom('turns').select(['job_id']).where('role', '=', 'agent').execute();
        const repliesPerJob = new Map<number, number>();
        for (const r of replies) repliesPerJob.set(r.job_id!, (repliesPerJob.get(r.job_id!) ?? 0) + 1);
        assert.deepEqual([...repliesPerJob.values()].filter((count) => count !== 1), [], 'one reply per job');
        const applied = await db.selectFrom('kysely_migration' as any).select('name' as any).orderBy('name' as any).execute() as { name: string }[];
        assert.deepEqual(applied.map((m) => m.name), Object.keys(migrationsFor(TEST_DB)));
        // The password hashes of the older build still let their people in.
        assert.equal((await runtime.services.accounts.checkCredentials('alice@example.test', PASSWORD))?.id, old.alice);
        assert.equal(await runtime.services.accounts.checkCredentials('bob@example.test', 'not the password'), null);
      } finally {
        await runtime.close();
      }
    } finally {
      await server?.kill();
      await database.drop();
    }
  });
}

/**
 * A rolling deploy: on PostgreSQL two instances of the new release start at once against a schema
 * left at 0.1.0's level; on SQLite (one server per file) the server and a CLI command do. The
 * migrations apply once, both start, and the work the old level left runs once between them.
 */
test('processes of the new release starting at once against an old database migrate it once and run its old queue once', { timeout: 90_000 }, async () => {
  const database = await freshDatabase();
  const servers: ServerProcess[] = [];
  try {
    await migrateTo(database, '001_initial');
    const old = await fillAsLevel(database, '001_initial');
    const env = databaseEnv(database);
    if (TEST_DB === 'postgres') {
      servers.push(...await Promise.all([startServerProcess(env), startServerProcess(env)]));
    } else {
      const [server, cli] = await Promise.all([startServerProcess(env), runCli(env, 'keys', 'list', '--email', 'alice@example.test')]);
      servers.push(server);
      assert.equal(cli.code, 0, cli.stderr);
      assert.equal(cli.stdout.trim().split('\n').length, 6, 'alice\'s six keys');
    }
    for (const server of servers) assert.equal((await call(server, old.tokens.main!, 'GET', '/agents')).status, 200);
    const sessionTwo = await until('the old queue running', () => walkTranscript(servers[0]!, old.tokens.main!, old.sessionTwo, 200),
      (t) => t.status === 'idle' && t.messages.filter((m: any) => m.role === 'agent').length >= 3);
    await until('the old continuation', () => walkTranscript(servers.at(-1)!, old.tokens.main!, old.sessionOne, 200),
      (t) => t.messages.some((m: any) => m.text === 'Noted: 7'));
    for (const server of servers) assert.equal((await server.kill('SIGTERM')).code, 0);
    servers.length = 0;
    assert.deepEqual(sessionTwo.messages.filter((m: any) => m.role === 'agent').map((m: any) => m.text),
      ['You said: slow one', 'You said: queued one', 'You said: queued two']);

    const store = await openStore(database.url, database.pgSchema ? { pgSchema: database.pgSchema } : {});
    try {
      const applied = await store.db.selectFrom('kysely_migration' as any).select('name' as any).orderBy('name' as any).execute() as { name: string }[];
      assert.deepEqual(applied.map((m) => m.name), Object.keys(migrationsFor(TEST_DB)), 'each migration recorded once');
      const replies = await store.db.selectFrom('turns').select(['job_id']).where('role', '=', 'agent').where('job_id', 'in', old.leftUnfinished).execute();
      assert.deepEqual(replies.map((r) => r.job_id).sort((a, b) => a! - b!), old.leftUnfinished, 'one reply per job left unfinished');
    } finally {
      await store.close();
    }
  } finally {
    for (const server of servers) await server.kill();
    await database.drop();
  }
});
