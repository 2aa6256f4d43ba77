import { sql, type Kysely, type Transaction } from 'kysely';
import type { DB, Job, JobKind, JobStatus } from '../store/schema.ts';
import { prepared } from '../store/prepared.ts';
import type { Dialect } from '../store/store.ts';

/**
 * Every statement the work queue runs, in one place (as pg-boss keeps its "plans").
 * The queue is the `jobs` table: FIFO per agent by id, at most `perAgent` running per agent.
 */

export async function enqueueJob(
  trx: Transaction<DB>,
  job: { agentId: string; sessionId: string; userId: string; kind: JobKind; payload: unknown; userTurnId?: number | null },
): Promise<number> {
  const row = await trx.insertInto('jobs').values({
    agent_id: job.agentId, session_id: job.sessionId, user_id: job.userId, kind: job.kind,
    payload: JSON.stringify(job.payload), status: 'queued', attempts: 0, user_turn_id: job.userTurnId ?? null,
    lease_owner: null, lease_expires_at: null, reply_turn_id: null, created_at: new Date().toISOString(),
    started_at: null, finished_at: null,
  }).returning('id').executeTakeFirstOrThrow();
  return Number(row.id);
}

// Status conditions are SQL literals, not parameters: only then can SQLite (and a generic
// PostgreSQL plan) use the partial indexes over unfinished jobs as history grows.
const isQueued = sql<boolean>`status = 'queued'`;
const isRunning = sql<boolean>`status = 'running'`;
const isOpen = sql<boolean>`status in ('queued', 'running')`;

// A job may start when fewer than perAgent of its agent's jobs are running or queued before it.
const claimable = (perAgent: number) => sql<boolean>`(
  select count(*) from jobs o
  where o.agent_id = jobs.agent_id
    and o.status in ('queued', 'running')
    and (o.status = 'running' or o.id < jobs.id)
) < ${perAgent}`;

/** Ids of jobs that could start now, oldest first. */
export async function findClaimable(db: Kysely<DB>, perAgent: number, limit: number): Promise<{ id: number; agent_id: string }[]> {
  const rows = await db.selectFrom('jobs').select(['id', 'agent_id'])
    .where(isQueued).where(claimable(perAgent))
    .orderBy('id').limit(limit).execute();
  return rows.map((r) => ({ id: Number(r.id), agent_id: r.agent_id }));
}

/**
 * Takes one job, inside the caller's transaction, if it is still claimable. On PostgreSQL a
 * transaction-scoped advisory lock per agent serialises claims for that agent across
 * instances (the others skip it rather than wait).
 */
export async function claimInTransaction(
  trx: Transaction<DB>, dialect: Dialect, candidate: { id: number; agent_id: string },
  owner: string, leaseMs: number, perAgent: number, lockNamespace: string,
): Promise<Job | null> {
  if (dialect === 'postgres') {
    const { rows } = await sql<{ locked: boolean }>`select pg_try_advisory_xact_lock(hashtext(${lockNamespace + candidate.agent_id})) as locked`.execute(trx);
    if (!rows[0]?.locked) return null;
  }
  const now = new Date();
  const job = await trx.updateTable('jobs').set((eb) => ({
    status: 'running',
    lease_owner: owner,
    lease_expires_at: new Date(now.getTime() + leaseMs).toISOString(),
    started_at: eb.fn.coalesce('started_at', sql<string>`${now.toISOString()}`),
    attempts: eb('attempts', '+', 1),
  })).where('id', '=', candidate.id).where(isQueued).where(claimable(perAgent))
    .returningAll().executeTakeFirst();
  return job ? normalize(job) : null;
}

/** Extends the leases of the jobs this runner holds; returns how many it still holds. */
export async function renewLeases(db: Kysely<DB>, owner: string, ids: number[], leaseMs: number): Promise<number> {
  if (ids.length === 0) return 0;
  const result = await db.updateTable('jobs').set({ lease_expires_at: new Date(Date.now() + leaseMs).toISOString() })
    .where('id', 'in', ids).where('lease_owner', '=', owner).where(isRunning).executeTakeFirst();
  return Number(result.numUpdatedRows);
}

/** Puts running jobs whose lease ran out (their runner died) back in line, in their old place. */
export async function requeueExpired(db: Kysely<DB>): Promise<number> {
  const result = await db.updateTable('jobs').set({ status: 'queued', lease_owner: null, lease_expires_at: null })
    .where(isRunning).where('lease_expires_at', '<', new Date().toISOString()).executeTakeFirst();
  return Number(result.numUpdatedRows);
}

/** Single-instance start: whatever was running belonged to a process that is gone. */
export async function requeueAllRunning(db: Kysely<DB>): Promise<number> {
  const result = await db.updateTable('jobs').set({ status: 'queued', lease_owner: null, lease_expires_at: null })
    .where(isRunning).executeTakeFirst();
  return Number(result.numUpdatedRows);
}

/** Gives a job back (shutdown after the grace period): it resumes at the next start. */
export async function releaseJob(db: Kysely<DB>, id: number, owner: string): Promise<void> {
  await db.updateTable('jobs').set({ status: 'queued', lease_owner: null, lease_expires_at: null })
    .where('id', '=', id).where('lease_owner', '=', owner).where(isRunning).execute();
}

/** Marks a job finished if this runner still holds it; false means the lease was lost. */
export async function finishJob(
  trx: Transaction<DB>, id: number, owner: string, status: Extract<JobStatus, 'done' | 'failed'>, replyTurnId: number | null,
): Promise<boolean> {
  const result = await trx.updateTable('jobs')
    .set({ status, reply_turn_id: replyTurnId, finished_at: new Date().toISOString(), lease_owner: null, lease_expires_at: null })
    .where('id', '=', id).where('lease_owner', '=', owner).where(isRunning).executeTakeFirst();
  return Number(result.numUpdatedRows) === 1;
}

const jobById = prepared((db, id: number) => db.selectFrom('jobs').selectAll().where('id', '=', id));

export async function getJob(db: Kysely<DB>, id: number): Promise<Job | undefined> {
  const [job] = await jobById(db, id);
  return job ? normalize(job) : undefined;
}

const openJobsOfSession = prepared((db, sessionId: string) => db.selectFrom('jobs').select('status')
  .where('session_id', '=', sessionId).where(isOpen));

/** idle / processing / queued, from the session's unfinished jobs. */
export async function sessionStatus(db: Kysely<DB>, sessionId: string): Promise<'idle' | 'processing' | 'queued'> {
  const open = await openJobsOfSession(db, sessionId);
  if (open.some((j) => j.status === 'running')) return 'processing';
  return open.length > 0 ? 'queued' : 'idle';
}

function normalize(job: Job): Job {
  return { ...job, id: Number(job.id), user_turn_id: job.user_turn_id === null ? null : Number(job.user_turn_id), reply_turn_id: job.reply_turn_id === null ? null : Number(job.reply_turn_id) };
}
