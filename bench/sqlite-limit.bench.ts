/**
 * The ceiling for instant turns on SQLite: the reference, "a node:sqlite script writing
 * the same rows, 100 turns per commit". No HTTP, no Kysely, no event loop to share: one
 * connection runs, with prepared statements, exactly the statements of the two transactions of
 * one send-and-wait turn of the server on SQLite (`!sleep 0`, a continued session, no webhook
 * endpoint; not the reads outside them: the key, the session, the agent, `awaiting`), in commit groups
 * of 100 turns, each turn's two transactions folded into its group's:
 * - accepting (sending.ts): the session's clock moved and the user turn inserted (appendTurn),
 *   the job inserted already running with a lease (insertJob), the duplicate window claimed
 *   (recent_messages);
 * - completing (turn-worker.ts, running.ts): the agent's reply turn (appendTurn again), the job
 *   finished with its reply_turn_id (finishJob), the recipient's webhook endpoints read (none),
 *   one `turn.completed` event recorded (recordEvents).
 * The file is migrated by our own migrations (openStore), so tables and indexes are the real
 * ones; the connection that writes has the store's pragmas (openNodeSqlite), SQLITE_SYNCHRONOUS
 * (full unless set) included. Turns rotate over N conversations (a session and an agent each),
 * as `npm run bench:load -- --sleep 0 --conversations 200` does; the server should reach at
 * least 60 % of this. Reports turns/s per round and the median, and the CPU a turn (this
 * process's user + system time; SQLite's own checkpoints run inline here, where the server runs
 * them on a thread of its own).
 *
 *   npm run bench:sqlite-limit
 *   npm run bench:sqlite-limit -- --seconds 5 --rounds 3 --conversations 200 --turns-per-commit 100
 *   SQLITE_SYNCHRONOUS=normal npm run bench:sqlite-limit
 *
 * About 20 s with the defaults.
 */
import { hash } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { parseArgs } from 'node:util';
import { generateApiKey, hashSecret } from '../src/domain/api-key.ts';
import { newId } from '../src/domain/ids.ts';
import { nextTs } from '../src/domain/turn-clock.ts';
import { openStore } from '../src/store/store.ts';
import { median } from './lib.ts';

const { values: flags } = parseArgs({
  options: {
    seconds: { type: 'string', default: '5' },
    rounds: { type: 'string', default: '3' },
    warmup: { type: 'string', default: '1' },
    conversations: { type: 'string', default: '200' },
    'turns-per-commit': { type: 'string', default: '100' },
  },
});
const SECONDS = Number(flags.seconds);
const ROUNDS = Number(flags.rounds);
const WARMUP_SECONDS = Number(flags.warmup);
const CONVERSATIONS = Number(flags.conversations);
const TURNS_PER_COMMIT = Number(flags['turns-per-commit']);
const SYNCHRONOUS = (process.env.SQLITE_SYNCHRONOUS || 'full').toLowerCase();
if (SYNCHRONOUS !== 'full' && SYNCHRONOUS !== 'normal') throw new Error('SQLITE_SYNCHRONOUS is full or normal');
if (!(CONVERSATIONS >= 1) || !(TURNS_PER_COMMIT >= 1) || !(SECONDS > 0) || !(ROUNDS >= 1)) throw new Error('--conversations, --turns-per-commit, --seconds and --rounds are positive numbers');

// The server's defaults (config.ts): AGENT_CONCURRENCY, JOB_LEASE_MS, DUPLICATE_WINDOW_MS, and an INSTANCE_ID of its form.
const PER_AGENT = 1;
const LEASE_MS = 15_000;
const DUPLICATE_WINDOW_MS = 10_000;
const INSTANCE_ID = `${process.pid}-${Math.random().toString(36).slice(2, 8)}`;

interface Conversation { sessionId: string; agentId: string }

/** A pro user with `count` agents, each with a session under way, and a key: made through openStore, so the file is migrated as the server's is. */
async function seed(path: string, count: number): Promise<{ userId: string; conversations: Conversation[] }> {
  const store = await openStore(`sqlite:${path}`, { sqliteSynchronous: SYNCHRONOUS as 'full' | 'normal' });
  try {
    const now = new Date().toISOString();
    const userId = newId('user');
    const workspaceId = newId('workspace');
    const conversations: Conversation[] = Array.from({ length: count }, () => ({ sessionId: newId('session'), agentId: newId('agent') }));
    await store.db.transaction().execute(async (trx) => {
      await trx.insertInto('users').values({ id: userId, email: 'limit@example.test', password_hash: 'unused', plan: 'pro', created_at: now }).execute();
      await trx.insertInto('workspaces').values({ id: workspaceId, name: 'Personal', personal_of: userId, created_at: now }).execute();
      await trx.insertInto('memberships').values({ workspace_id: workspaceId, user_id: userId, role: 'owner', created_at: now }).execute();
      const { keyId, secret } = generateApiKey();
      await trx.insertInto('api_keys').values({
        id: keyId, user_id: userId, label: 'limit', secret_hash: hashSecret(secret), rate_limit: 50_000_000, status: 'active',
        expires_at: null, created_at: now, revoked_at: null, last_used_at: null,
      }).execute();
      for (const [i, { sessionId, agentId }] of conversations.entries()) {
        await trx.insertInto('agents').values({ id: agentId, workspace_id: workspaceId, name: `Limit ${i}`, created_by: userId, created_at: now }).execute();
        await trx.insertInto('sessions').values({ id: sessionId, user_id: userId, agent_id: agentId, channel: 'api', last_ts: nextTs(null), created_at: now }).execute();
      }
    });
    return { userId, conversations };
  } finally {
    await store.close();
  }
}

/** A connection as openNodeSqlite makes it: the same pragmas, in the same order. */
function openWriter(path: string): DatabaseSync {
  const db = new DatabaseSync(path);
  db.exec('PRAGMA busy_timeout = 5000');
  db.exec('PRAGMA journal_mode = WAL');
  db.exec(`PRAGMA synchronous = ${SYNCHRONOUS.toUpperCase()}`);
  db.exec('PRAGMA foreign_keys = ON');
  db.exec('PRAGMA temp_store = MEMORY');
  return db;
}

/** The statements of one turn, prepared once: the SQL Kysely compiles for the server on SQLite, word for word. */
function statementsOf(db: DatabaseSync) {
  return {
    begin: db.prepare('begin immediate'),
    commit: db.prepare('commit'),
    advanceClockIfBehind: db.prepare('update "sessions" set "last_ts" = ? where "id" = ? and "last_ts" < ?'),
    sessionClock: db.prepare('select "last_ts" from "sessions" where "id" = ?'),
    advanceClock: db.prepare('update "sessions" set "last_ts" = ? where "id" = ?'),
    insertTurn: db.prepare('insert into "turns" ("session_id", "role", "text", "ts", "error", "job_id") values (?, ?, ?, ?, ?, ?) returning "id"'),
    insertJob: db.prepare('insert into "jobs" ("agent_id", "session_id", "user_id", "kind", "payload", "status", "attempts", "user_turn_id", "lease_owner", '
      + '"lease_expires_at", "reply_turn_id", "created_at", "started_at", "finished_at") select ? as "agent_id", ? as "session_id", ? as "user_id", ? as "kind", '
      + '? as "payload", case when line.open < ? then \'running\' else \'queued\' end as "status", case when line.open < ? then 1 else 0 end as "attempts", '
      + '? as "user_turn_id", case when line.open < ? then ? end as "lease_owner", case when line.open < ? then ? end as "lease_expires_at", '
      + 'null as "reply_turn_id", ? as "created_at", case when line.open < ? then ? end as "started_at", null as "finished_at" '
      + 'from (select count(*) as "open" from "jobs" where "agent_id" = ? and status not in (\'done\', \'failed\')) as "line" '
      + 'returning "id", "agent_id", "session_id", "user_id", "kind", "payload", "status", "attempts", "lease_owner", "lease_expires_at", '
      + '"user_turn_id", "reply_turn_id", "created_at", "started_at", "finished_at"'),
    claimRecentMessage: db.prepare('insert into "recent_messages" ("user_id", "target", "text_hash", "session_id", "job_id", "created_at") values (?, ?, ?, ?, ?, ?) '
      + 'on conflict ("user_id", "target", "text_hash") do update set "created_at" = "excluded"."created_at", "session_id" = "excluded"."session_id", '
      + '"job_id" = "excluded"."job_id" where "recent_messages"."created_at" <= ? returning "user_id"'),
    finishJob: db.prepare('update "jobs" set "status" = ?, "reply_turn_id" = ?, "finished_at" = ?, "lease_owner" = ?, "lease_expires_at" = ? '
      + 'where "id" = ? and "lease_owner" = ? and status = \'running\''),
    subscribedEndpoints: db.prepare('select "id", "owner_user_id", "events" from "webhook_endpoints" where "owner_user_id" in (?) and "enabled" = ?'),
    insertEvent: db.prepare('insert into "events" ("recipient_user_id", "type", "session_id", "agent_id", "data", "created_at") values (?, ?, ?, ?, ?, ?)'),
  };
}

type Statements = ReturnType<typeof statementsOf>;

/** appendTurn on SQLite: the clock moved by one conditional update, or else read and moved; then the turn. */
function appendTurn(s: Statements, sessionId: string, role: 'user' | 'agent', text: string, jobId: number | null): { id: number; ts: string } {
  const now = nextTs(null);
  let ts = now;
  if (s.advanceClockIfBehind.run(now, sessionId, now).changes !== 1) {
    const { last_ts: lastTs } = s.sessionClock.get(sessionId) as { last_ts: string | null };
    ts = nextTs(lastTs);
    s.advanceClock.run(ts, sessionId);
  }
  const [row] = s.insertTurn.all(sessionId, role, text, ts, null, jobId) as Array<{ id: number }>;
  return { id: Number(row!.id), ts };
}

let messagesSent = 0; // every text new, as the load bench's are

/** One instant send-and-wait turn: what the accepting and the completing transactions write, in the caller's transaction. */
function turn(s: Statements, userId: string, { sessionId, agentId }: Conversation): void {
  const n = messagesSent++;
  const text = `!sleep 0 m${n}`;
  const userTurn = appendTurn(s, sessionId, 'user', text, null);
  const acceptedAt = Date.now();
  const createdAt = new Date(acceptedAt).toISOString();
  const [job] = s.insertJob.all(agentId, sessionId, userId, 'message', JSON.stringify({ kind: 'message', text }), PER_AGENT, PER_AGENT, userTurn.id,
    PER_AGENT, INSTANCE_ID, PER_AGENT, new Date(acceptedAt + LEASE_MS).toISOString(), createdAt, PER_AGENT, createdAt, agentId) as Array<{ id: number; status: string }>;
  if (job!.status !== 'running') throw new Error(`job ${job!.id} inserted ${job!.status}, not running: the agent's line was not empty`);
  const claimed = s.claimRecentMessage.all(userId, sessionId, hash('sha256', text, 'hex'), sessionId, job!.id, createdAt,
    new Date(acceptedAt - DUPLICATE_WINDOW_MS).toISOString());
  if (claimed.length !== 1) throw new Error('the duplicate window was not claimed');

  const reply = `You said: m${n}`;
  const replyTurn = appendTurn(s, sessionId, 'agent', reply, job!.id);
  const finishedAt = new Date().toISOString();
  if (s.finishJob.run('done', replyTurn.id, finishedAt, null, null, job!.id, INSTANCE_ID).changes !== 1) throw new Error(`job ${job!.id} was not finished`);
  if (s.subscribedEndpoints.all(userId, 1).length !== 0) throw new Error('a webhook endpoint was found');
  s.insertEvent.run(userId, 'turn.completed', sessionId, agentId, JSON.stringify({ text: reply, ts: replyTurn.ts }), finishedAt);
}

/** Commit groups of TURNS_PER_COMMIT turns, rotating over the conversations, for `seconds`; returns the turns and the CPU they took. */
function run(s: Statements, userId: string, conversations: Conversation[], seconds: number): { turns: number; seconds: number; cpuUs: number } {
  const cpuAtStart = process.cpuUsage();
  const startMs = performance.now();
  const endMs = startMs + seconds * 1000;
  let turns = 0;
  let nowMs = startMs;
  while (nowMs < endMs) {
    s.begin.run();
    for (let i = 0; i < TURNS_PER_COMMIT; i++) turn(s, userId, conversations[(turns + i) % conversations.length]!);
    s.commit.run();
    turns += TURNS_PER_COMMIT;
    nowMs = performance.now();
  }
  const cpu = process.cpuUsage(cpuAtStart);
  return { turns, seconds: (nowMs - startMs) / 1000, cpuUs: cpu.user + cpu.system };
}

/** Every turn sent has its two turns, its finished job and its event: the statements did what the server's do. */
function checkEveryTurnWritten(db: DatabaseSync): void {
  const count = (sql: string) => Number((db.prepare(sql).get() as { n: number }).n);
  const found = {
    turns: count('select count(*) as n from turns'), jobs: count("select count(*) as n from jobs where status = 'done' and reply_turn_id is not null"),
    events: count('select count(*) as n from events'), open: count("select count(*) as n from jobs where status <> 'done'"),
  };
  if (found.turns !== 2 * messagesSent || found.jobs !== messagesSent || found.events !== messagesSent || found.open !== 0) {
    throw new Error(`${messagesSent} turns sent, but found ${JSON.stringify(found)}`);
  }
}

/** The machine's load averages (1, 5, 15 minutes): other work sharing the cores shows here. */
const loadAverage = (): string => readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ');

const dir = mkdtempSync(join(tmpdir(), 'agent-channel-sqlite-limit-'));
let db: DatabaseSync | null = null;
try {
  console.log(`${cpus().length} cores (${cpus()[0]?.model ?? 'unknown'}), Node ${process.version}; SQLite synchronous=${SYNCHRONOUS}; `
    + `${CONVERSATIONS} conversations, ${TURNS_PER_COMMIT} turns a commit; ${ROUNDS} round(s) of ${SECONDS} s after a warm-up of ${WARMUP_SECONDS} s; load average ${loadAverage()}`);
  const path = join(dir, 'limit.db');
  const { userId, conversations } = await seed(path, CONVERSATIONS);
  db = openWriter(path);
  const statements = statementsOf(db);
  if (WARMUP_SECONDS > 0) run(statements, userId, conversations, WARMUP_SECONDS);
  const rates: number[] = [];
  const cpuUs: number[] = [];
  for (let r = 1; r <= ROUNDS; r++) {
    const result = run(statements, userId, conversations, SECONDS);
    rates.push(result.turns / result.seconds);
    cpuUs.push(result.cpuUs / result.turns);
    console.log(`round ${r}: ${rates.at(-1)!.toFixed(0)} turns/s (${(rates.at(-1)! / TURNS_PER_COMMIT).toFixed(0)} commits/s), `
      + `CPU a turn ${cpuUs.at(-1)!.toFixed(0)} µs (load average ${loadAverage()})`);
  }
  checkEveryTurnWritten(db);
  const limit = median(rates);
  console.log(`median: ${limit.toFixed(0)} turns/s, CPU a turn ${median(cpuUs).toFixed(0)} µs; 60 % of it, what the server should reach with `
    + `\`npm run bench:load -- --sleep 0 --conversations ${CONVERSATIONS}\`: ${(0.6 * limit).toFixed(0)} turns/s (load average at the end ${loadAverage()})`);
} finally {
  db?.close();
  rmSync(dir, { recursive: true, force: true });
}
