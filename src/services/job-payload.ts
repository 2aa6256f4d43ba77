/** What a job carries: the brain input of one unit of work, and the mission it continues. */
export type JobPayload =
  | { kind: 'message'; text: string }
  | { kind: 'action_approved'; missionId: string; operationId: string }
  | { kind: 'action_rejected'; missionId: string; operationId: string; reason: string | null }
  | { kind: 'question_answered'; missionId: string; requestId: string; answer: string };
