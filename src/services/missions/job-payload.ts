import type { Job } from '../../store/schema.ts';

/** What a job carries: the brain input of one unit of work, and the mission it continues. */
export type JobPayload =
  | { kind: 'message'; text: string }
  | { kind: 'action_approved'; missionId: string; operationId: string }
  | { kind: 'action_rejected'; missionId: string; operationId: string; reason: string | null }
  | { kind: 'question_answered'; missionId: string; requestId: string; answer: string };

/** A mission's next unit of work, after a decision or an answer. */
export type ContinuationPayload = Exclude<JobPayload, { kind: 'message' }>;

/** The payload a job was enqueued with (stored as JSON). */
export function payloadOf(job: Pick<Job, 'payload'>): JobPayload {
  return JSON.parse(job.payload) as JobPayload;
}
