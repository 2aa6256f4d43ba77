import { type ExpressionBuilder, sql, type Kysely, type RawBuilder, type Transaction } from 'kysely';
import type { DB, Job, JobKind, JobStatus, Session } from '../store/schema.ts';
import { sendAhead } from '../store/postgres-dialect.ts';
import { prepared } from '../store/prepared.ts';
import type { Store } from '../store/store.ts';
import type { Dialect } from '../store/dialect.ts';
import type { UnitOfWork } from './unit-of-work.ts';

/**
 * Every statement the work queue runs, in one place (as pg-boss keeps its "plans").
 * The queue is the `jobs` table: FIFO per agent by id, at most `perAgent` running per agent.
 */

// Every column of a job, named: a statement that names its columns keeps its prepared plan on
// PostgreSQL when a migration adds one (see store/postgres-dialect.ts).
const JOB_COLUMNS = ['id', 'agent_id', 'session_id', 'user_id', 'kind', 'payload', 'status', 'attempts', 'lease_owner',
  'lease_expires_at', 'user_turn_id', 'reply_turn_id', 'created_at', 'started_at', 'finished_at'] as const satisfies ReadonlyArray<keyof Job>;

// Status conditions are SQL literals, not parameters: only then can SQLite (and a generic
// PostgreSQL plan) use the partial indexes over unfinished jobs as history grows.
const isQueued = sql<boolean>`status = 'queued'`;
const isRunning = sql<boolean>`status = 'running'`;
export const isOpen = sql<boolean>`status in ('queued', 'running')`;
// The same, in the words of jobs_line's condition, which a statement must repeat for SQLite to
// use that index. Said as "not finished" so that SQLite seeks on the statement's own
// `status = 'running'` (or 'queued'), where an `in` list would make it read both.
const inLine = sql<boolean>`status not in ('done', 'failed')`;

export interface NewJob {
  agentId: string;
  sessionId: string;
  userId: string;
  kind: JobKind;
  payload: unknown;
  userTurnId?: number | null;
}

// The job joins the end of its agent's line, and is inserted already running when fewer than
// `perAgent` of that agent's jobs are open (perAgent 0: always queued). One statement: the count
// and the insert see the same line, which the caller holds (lockAgentLine).
const insertJobRow = prepared((db, agentId: string, sessionId: string, userId: string, kind: JobKind, payload: string,
  userTurnId: number | null, perAgent: number, leaseOwner: string, leaseExpiresAt: string, createdAt: string) => {
  const claims = sql<boolean>`line.open < ${perAgent}`;
  return db.insertInto('jobs')
    .columns(['agent_id', 'session_id', 'user_id', 'kind', 'payload', 'status', 'attempts', 'user_turn_id',
      'lease_owner', 'lease_expires_at', 'reply_turn_id', 'created_at', 'started_at', 'finished_at'])
    .expression(db.selectFrom(db.selectFrom('jobs').select((eb) => eb.fn.countAll<number>().as('open'))
      .where('agent_id', '=', agentId).where(inLine).as('line'))
      .select([
        sql.val(agentId).as('agent_id'), sql.val(sessionId).as('session_id'), sql.val(userId).as('user_id'),
        sql.val(kind).as('kind'), sql.val(payload).as('payload'),
        sql<JobStatus>`case when ${claims} then 'running' else 'queued' end`.as('status'),
        sql<number>`case when ${claims} then 1 else 0 end`.as('attempts'),
        sql.val(userTurnId).as('user_turn_id'),
        sql<string | null>`case when ${claims} then ${leaseOwner} end`.as('lease_owner'),
        sql<string | null>`case when ${claims} then ${leaseExpiresAt} end`.as('lease_expires_at'),
        sql<null>`null`.as('reply_turn_id'),
        sql.val(createdAt).as('created_at'),
        sql<string | null>`case when ${claims} then ${createdAt} end`.as('started_at'),
        sql<null>`null`.as('finished_at'),
      ]))
    .returning(JOB_COLUMNS);
});

/**
 * Inserts a job at the end of its agent's line: already running under `claim` when the agent
 * has fewer than `claim.perAgent` jobs open, else queued. The caller holds the agent's line
 * (lockAgentLine) and, when the job comes back running, starts it once the transaction commits.
 * `now` is the store's clock (its lease is compared by other instances).
 */
export async function insertJob(trx: Transaction<DB>, job: NewJob, claim: { owner: string; leaseMs: number; perAgent: number } | null, now: number): Promise<Job> {
  const [row] = await insertJobRow(trx, job.agentId, job.sessionId, job.userId, job.kind, JSON.stringify(job.payload),
    job.userTurnId ?? null, claim?.perAgent ?? 0, claim?.owner ?? '', new Date(now + (claim?.leaseMs ?? 0)).toISOString(), new Date(now).toISOString());
  return normalize(row!);
}

/** Enqueues a job for whichever runner gets to it, and tells the runners at commit; returns its id. */
export async function enqueueJob(tx: UnitOfWork, store: QueueStore, job: NewJob): Promise<number> {
  await lockAgentLine(tx.db, store, job.agentId);
  const { id } = await insertJob(tx.db, job, null, store.clock.now());
  await tx.publish({ type: 'job_enqueued', agentId: job.agentId });
  return id;
}

/** What the queue needs to know of the store it runs on. */
export type QueueStore = Pick<Store, 'dialect' | 'pgSchema' | 'clock'>;

/**
 * Holds the agent's line for the rest of the transaction, before a job joins it. On PostgreSQL
 * a job's place is its id, given at insert, not at commit: without this, a newer job could be
 * claimed past an older one whose transaction has not committed yet. Claims only try the lock
 * (claimInTransaction), so a runner never waits behind an enqueue. The lock goes out with the
 * insert that follows it (sendAhead), in one round trip. SQLite writes one transaction at a
 * time: nothing to do.
 */
export async function lockAgentLine(trx: Transaction<DB>, store: QueueStore, agentId: string): Promise<void> {
  if (store.dialect !== 'postgres') return;
  await sendAhead(trx, sql`select pg_advisory_xact_lock(${agentLineKey(store, agentId)})`.compile(trx));
}

/** PostgreSQL: the agent's line if nobody holds it (see lockAgentLine); false rather than wait. */
async function tryLockAgentLine(trx: Transaction<DB>, store: QueueStore, agentId: string): Promise<boolean> {
  const { rows } = await sql<{ locked: boolean }>`select pg_try_advisory_xact_lock(${agentLineKey(store, agentId)}) as locked`.execute(trx);
  return rows[0]?.locked === true;
}

/** The advisory lock of one agent's line: per schema, so test runs sharing a database never meet. */
const agentLineKey = (store: QueueStore, agentId: string) => sql`hashtext(${(store.pgSchema ?? '') + agentId})`;

// How many of the agent's jobs are running, counted no further than perAgent: at most perAgent
// entries of jobs_line read, however long the agent's line.
const runningCount = (agentId: RawBuilder<unknown>, perAgent: number) => sql<number>`(select count(*) from (
  select 1 from jobs r where r.agent_id = ${agentId} and ${inLine} and r.status = 'running' limit ${perAgent}) running)`;

// A queued job may start when its agent's running jobs and the queued jobs ahead of it in line are
// fewer than perAgent, each counted no further than perAgent (counting the whole line ahead of
// each queued job reads some Q²/2 rows for a line of Q, on the event loop with SQLite).
// The jobs ahead are found among the first perAgent entries of jobs_line from the agent's line on
// (if the job is not among them, all perAgent of them are ahead of it), read in the index's own
// order from a range on the agent: given agent_id = ?, PostgreSQL may count them through another
// index in id order, reading a long line of some other agent through.
const claimable = (perAgent: number) => (perAgent < 1 ? sql<boolean>`false` : sql<boolean>`${runningCount(sql.ref('jobs.agent_id'), perAgent)} + (select count(*) from (
  select a.agent_id, a.id from jobs a where a.agent_id >= jobs.agent_id and ${inLine} and a.status <> 'running'
  order by a.agent_id, a.status, a.id limit ${perAgent}) front where front.agent_id = jobs.agent_id and front.id < jobs.id) < ${perAgent}`);

const anyQueuedJob = prepared((db) => db.selectFrom('jobs').select('id').where(isQueued).limit(1));

/** Is any job waiting at all (startable now or not)? One probe of the queued-jobs index. */
export async function hasQueuedJobs(db: Kysely<DB>): Promise<boolean> {
  return (await anyQueuedJob(db)).length > 0;
}

/** Unfinished jobs of the whole deployment, by status. */
export type OpenJobCounts = Record<'queued' | 'running', number>;

const openJobsByStatus = prepared((db) => db.selectFrom('jobs')
  .select(['status', (eb) => eb.fn.countAll<number | string>().as('count')]).where(inLine).groupBy('status'));

/** Reads the jobs_line index (unfinished jobs only), never the history of finished ones. */
export async function countOpenJobs(db: Kysely<DB>): Promise<OpenJobCounts> {
  const counts: OpenJobCounts = { queued: 0, running: 0 };
  for (const row of await openJobsByStatus(db)) {
    if (row.status === 'queued' || row.status === 'running') counts[row.status] = Number(row.count);
  }
  return counts;
}

/** Ids of jobs that could start now, oldest first. */
export async function findClaimable(db: Kysely<DB>, perAgent: number, limit: number): Promise<{ id: number; agent_id: string }[]> {
  if (perAgent < 1) return [];
  // Usually the oldest queued jobs can start (agents wait for free runner slots, not for their
  // lines): a look at the first few, in id order, finds them. Only when those are mostly behind
  // full lines is walking every line's head (findClaimableQuery) worth its cost, which grows with
  // the number of agents that have work waiting.
  const look = Math.max(32, 4 * limit);
  const { rows } = await oldestQueuedQuery(perAgent, look).execute(db);
  const startable = rows.filter((row) => Number(row.startable) === 1).slice(0, limit);
  // Enough found among the oldest, or every queued job seen: these are the oldest that may start.
  const answer = startable.length === limit || rows.length < look ? startable : (await findClaimableQuery(perAgent, limit).execute(db)).rows;
  return answer.map((r) => ({ id: Number(r.id), agent_id: r.agent_id }));
}

/** Whether one queued job may start now (the condition a claim checks; its tests read its plan). */
export const isStartableQuery = (perAgent: number, id: number) => sql<{ id: number | string }>`
  select id from jobs where id = ${id} and ${isQueued} and ${claimable(perAgent)}`;

/** The oldest `look` queued jobs, each with whether it may start now. */
export const oldestQueuedQuery = (perAgent: number, look: number) => sql<{ id: number | string; agent_id: string; startable: number | string }>`
  select id, agent_id, case when ${claimable(perAgent)} then 1 else 0 end as startable
  from jobs where ${isQueued} order by id limit ${look}`;

/**
 * findClaimable's walk over every line (its tests read its plan). Only the first `perAgent` queued jobs
 * of an agent's line can start, so `heads` walks jobs_line in (agent, id) order from one line's
 * head to the next, taking at most `perAgent` jobs of each line and stepping over the rest with
 * one index search; it then keeps the heads whose agent has room. Its cost grows with the number
 * of agents that have work waiting, not with the length of their lines (reading every queued job
 * grows with the queue, and PostgreSQL may plan each job's own check as a read of the whole table).
 *
 * Every step orders by jobs_line's own columns and bounds the agent by a range, never an
 * equality: with `agent_id = ?` PostgreSQL may instead walk the primary key in id order and
 * filter (it guesses each agent holds an even share of the jobs), which reads a long line through.
 */
export const findClaimableQuery = (perAgent: number, limit: number) => {
  const lineOrder = sql`order by q.agent_id, q.status, q.id limit 1`;
  // Queued, said as "in line but not running": given status = 'queued', SQLite drops status from
  // the order it must keep, then sorts each agent's whole line by id (its last ORDER BY term).
  const queued = sql`${inLine} and q.status <> 'running'`;
  return sql<{ id: number | string; agent_id: string }>`
  with recursive heads(id, agent_id, place) as (
    select j.id, j.agent_id, 1 from jobs j
    where j.id = (select q.id from jobs q where ${queued} ${lineOrder})
    union all
    select j.id, j.agent_id, case when j.agent_id = h.agent_id then h.place + 1 else 1 end
    from heads h cross join jobs j
    where j.id = case
      when h.place < ${perAgent} then -- the next job in this line, or else the next line's head
        (select q.id from jobs q where ${queued} and q.agent_id >= h.agent_id and (q.agent_id > h.agent_id or q.id > h.id) ${lineOrder})
      else -- the next line's head
        (select q.id from jobs q where ${queued} and q.agent_id > h.agent_id ${lineOrder})
    end
  )
  select id, agent_id from heads
  where ${runningCount(sql.ref('heads.agent_id'), perAgent)} + place - 1 < ${perAgent}
  order by id limit ${limit}`;
};

/**
 * Takes one job, inside the caller's transaction, if it is still claimable. On PostgreSQL a
 * transaction-scoped advisory lock per agent serialises claims for that agent across
 * instances (the others skip it rather than wait).
 */
export async function claimInTransaction(
  trx: Transaction<DB>, store: QueueStore, candidate: { id: number; agent_id: string },
  owner: string, leaseMs: number, perAgent: number,
): Promise<Job | null> {
  if (store.dialect === 'postgres' && !(await tryLockAgentLine(trx, store, candidate.agent_id))) return null;
  const now = new Date(store.clock.now());
  const job = await trx.updateTable('jobs').set((eb) => ({
    status: 'running',
    lease_owner: owner,
    lease_expires_at: new Date(now.getTime() + leaseMs).toISOString(),
    started_at: eb.fn.coalesce('started_at', sql<string>`${now.toISOString()}`),
    attempts: eb('attempts', '+', 1),
  })).where('id', '=', candidate.id).where(isQueued).where(claimable(perAgent))
    .returning(JOB_COLUMNS).executeTakeFirst();
  return job ? normalize(job) : null;
}

/** Extends the leases of the jobs this runner holds; returns the ids still its own (a missing one was taken over). `now` is the store's clock. */
export async function renewLeases(db: Kysely<DB>, owner: string, ids: number[], leaseMs: number, now: number): Promise<number[]> {
  const renewed: number[] = [];
  // In slices: thousands of running turns are renewed without holding SQLite's one thread (and
  // every request behind it) for one long statement, and within the databases' limits on parameters.
  for (let start = 0; start < ids.length; start += RENEW_SLICE) {
    const rows = await db.updateTable('jobs').set({ lease_expires_at: new Date(now + leaseMs).toISOString() })
      .where('id', 'in', ids.slice(start, start + RENEW_SLICE)).where('lease_owner', '=', owner).where(isRunning).returning('id').execute();
    for (const row of rows) renewed.push(Number(row.id));
  }
  return renewed;
}

const RENEW_SLICE = 500;

/**
 * Puts running jobs whose lease ran out (their runner died) back in line, in their old place;
 * returns their agents. `now` is the store's clock, the one every runner writes its leases by.
 */
// isOpen as well as isRunning in the two below, though implied: SQLite uses the partial index of
// open jobs only when the query repeats its condition (without it, it reads every job ever run).
export async function requeueExpired(db: Kysely<DB>, now: number): Promise<string[]> {
  const rows = await db.updateTable('jobs').set({ status: 'queued', lease_owner: null, lease_expires_at: null })
    .where(isOpen).where(isRunning).where('lease_expires_at', '<', new Date(now).toISOString()).returning('agent_id').execute();
  return [...new Set(rows.map((row) => row.agent_id))];
}

/** Single-instance start: whatever was running belonged to a process that is gone. */
export async function requeueAllRunning(db: Kysely<DB>): Promise<number> {
  const result = await db.updateTable('jobs').set({ status: 'queued', lease_owner: null, lease_expires_at: null })
    .where(isOpen).where(isRunning).executeTakeFirst();
  return Number(result.numUpdatedRows);
}

/**
 * Gives a job back (shutdown after the grace period): it resumes at the next start. The attempt
 * is given back too: an orderly shutdown is not one of the crashes that end a turn as failed.
 */
export async function releaseJob(db: Kysely<DB>, id: number, owner: string): Promise<boolean> {
  const result = await db.updateTable('jobs').set((eb) => ({ status: 'queued', lease_owner: null, lease_expires_at: null, attempts: eb('attempts', '-', 1) }))
    .where('id', '=', id).where('lease_owner', '=', owner).where(isRunning).executeTakeFirst();
  return Number(result.numUpdatedRows) === 1;
}

const finishJobRow = prepared((db, id: number, owner: string, status: Extract<JobStatus, 'done' | 'failed'>, replyTurnId: number | null, finishedAt: string) =>
  db.updateTable('jobs')
    .set({ status, reply_turn_id: replyTurnId, finished_at: finishedAt, lease_owner: null, lease_expires_at: null })
    .where('id', '=', id).where('lease_owner', '=', owner).where(isRunning));

/** Marks a job finished if this runner still holds it; false means the lease was lost. */
export async function finishJob(
  trx: Transaction<DB>, id: number, owner: string, status: Extract<JobStatus, 'done' | 'failed'>, replyTurnId: number | null, now: number,
): Promise<boolean> {
  return (await finishJobRow.affected(trx, id, owner, status, replyTurnId, new Date(now).toISOString())) === 1;
}

const jobById = prepared((db, id: number) => db.selectFrom('jobs').select(JOB_COLUMNS).where('id', '=', id));

export async function getJob(db: Kysely<DB>, id: number): Promise<Job | undefined> {
  const [job] = await jobById(db, id);
  return job ? normalize(job) : undefined;
}

/** Those of these jobs that have finished, in one read (an empty list reads nothing). */
export async function finishedJobs(db: Kysely<DB>, ids: number[]): Promise<Job[]> {
  const found: Job[] = [];
  // A statement holds at most 32,766 parameters on SQLite (65,535 on PostgreSQL), and a busy
  // instance may hold more waiting requests than that: asked a slice at a time.
  for (let start = 0; start < ids.length; start += IDS_PER_STATEMENT) {
    const slice = ids.slice(start, start + IDS_PER_STATEMENT);
    const rows = await db.selectFrom('jobs').select(JOB_COLUMNS).where('id', 'in', slice).where('status', 'in', ['done', 'failed']).execute();
    for (const row of rows) found.push(normalize(row));
  }
  return found;
}

const IDS_PER_STATEMENT = 1000;

/**
 * A session's open jobs, oldest first; on PostgreSQL locked for the rest of the transaction, so
 * that a runner finishing one of them waits, then finds its lease gone.
 */
export async function openJobsOfSession(trx: Transaction<DB>, dialect: Dialect, sessionId: string): Promise<Job[]> {
  const rows = await trx.selectFrom('jobs').select(JOB_COLUMNS).where('session_id', '=', sessionId).where(isOpen)
    .orderBy('id').$if(dialect === 'postgres', (q) => q.forUpdate()).execute();
  return rows.map(normalize);
}

/**
 * Ends an open job as cancelled: finished with `replyTurnId` (its `Cancelled.` turn, if any) and
 * no lease, so that a runner still on it writes nothing. False when it had finished already.
 */
export async function cancelJob(trx: Transaction<DB>, id: number, replyTurnId: number | null, now: number): Promise<boolean> {
  const result = await trx.updateTable('jobs')
    .set({ status: 'done', reply_turn_id: replyTurnId, finished_at: new Date(now).toISOString(), lease_owner: null, lease_expires_at: null })
    .where('id', '=', id).where(isOpen).executeTakeFirst();
  return Number(result.numUpdatedRows) === 1;
}

/** The payloads of a session's (or, with null, every session's) continuations still queued or running, other than `exceptJobId`. */
export async function openContinuationPayloads(db: Kysely<DB>, sessionId: string | null, exceptJobId: number | null): Promise<unknown[]> {
  const rows = await db.selectFrom('jobs').select(['id', 'payload'])
    .$if(sessionId !== null, (q) => q.where('session_id', '=', sessionId!)).where(isOpen).where('kind', '=', 'continuation').execute();
  return rows.filter((row) => Number(row.id) !== exceptJobId).map((row) => JSON.parse(row.payload) as unknown);
}

export type SessionStatus = 'idle' | 'processing' | 'queued';

/**
 * Whether a session has an open job, and a running one, as two columns of a query over sessions
 * (read them with statusOfSession): not how many, since a count (or reading the open jobs) reads
 * a session's whole queue, at every poll of its status.
 */
export const openJobsOf = (eb: ExpressionBuilder<DB, 'sessions'>) => [
  eb.exists(eb.selectFrom('jobs').select(sql`1`.as('one')).whereRef('jobs.session_id', '=', 'sessions.id').where(isOpen)).as('open_jobs'),
  // isOpen as well, though implied: SQLite uses a partial index only when the query's
  // condition repeats the index's own (without it, this scanned every job).
  eb.exists(eb.selectFrom('jobs').select(sql`1`.as('one')).whereRef('jobs.session_id', '=', 'sessions.id').where(isOpen).where(isRunning)).as('running_jobs'),
] as const;

// A session with its status, in one statement (one round trip on PostgreSQL, one snapshot).
const sessionWithOpenJobs = prepared((db, sessionId: string, userId: string) => db.selectFrom('sessions')
  .select((eb) => ['id', 'user_id', 'agent_id', 'channel', 'last_ts', 'created_at', ...openJobsOf(eb)])
  .where('id', '=', sessionId).where('user_id', '=', userId));

/** The user's own session and its idle / processing / queued status; undefined for anyone else's. */
export async function ownSessionWithStatus(db: Kysely<DB>, sessionId: string, userId: string): Promise<{ session: Session; status: SessionStatus } | undefined> {
  const [row] = await sessionWithOpenJobs(db, sessionId, userId);
  if (!row) return undefined;
  const { open_jobs: _open, running_jobs: _running, ...session } = row;
  return { session, status: statusOfSession(row) };
}

/** A session's status from the two columns of openJobsOf (booleans on PostgreSQL, 0 or 1 on SQLite). */
export function statusOfSession(row: { open_jobs: unknown; running_jobs: unknown }): SessionStatus {
  if (Number(row.running_jobs)) return 'processing';
  return Number(row.open_jobs) ? 'queued' : 'idle';
}

function normalize(job: Job): Job {
  return { ...job, id: Number(job.id), user_turn_id: job.user_turn_id === null ? null : Number(job.user_turn_id), reply_turn_id: job.reply_turn_id === null ? null : Number(job.reply_turn_id) };
}
