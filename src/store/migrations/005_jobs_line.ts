import { sql, type Kysely } from 'kysely';

/**
 * Each agent's line: its unfinished jobs by agent, then status, then place (id). Replaces
 * jobs_open_by_agent (agent, id), in which an agent's running jobs and the head of its line could
 * only be found by reading the whole line; the scan for work that may start now steps from one
 * line's head to the next (see findClaimableQuery). Its condition is "not finished" rather than
 * `status in ('queued', 'running')`: SQLite uses a partial index only for a statement that
 * repeats its condition, and an `in` list repeated there would be what it seeks on, reading an
 * agent's queued jobs to find its running ones.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`create index jobs_line on jobs (agent_id, status, id) where status not in ('done', 'failed')`.execute(db);
  await sql`drop index jobs_open_by_agent`.execute(db);
}
