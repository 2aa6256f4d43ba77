import type { Action, Question } from '../../store/schema.ts';
import type { OpenQuestion, PendingAction } from './schemas.ts';

/** An action as the person who decides on it sees it. */
export function toPendingAction(a: Action): PendingAction {
  return {
    operation_id: a.id, kind: a.kind, summary: a.summary, details: parseDetails(a.details),
    session_id: a.session_id, agent_id: a.agent_id, mission_id: a.mission_id, created_at: a.created_at,
  };
}

/** A question as the person who answers it sees it. */
export function toOpenQuestion(q: Question): OpenQuestion {
  return {
    request_id: q.id, text: q.text, session_id: q.session_id, agent_id: q.agent_id, mission_id: q.mission_id,
    asked_of: q.asked_of, answer_type: q.answer_type, created_at: q.created_at,
  };
}

/** An action's details are an object; anything else the agent drafted is shown as `{ value }`. */
function parseDetails(json: string): Record<string, unknown> {
  try {
    const value: unknown = JSON.parse(json);
    return value !== null && typeof value === 'object' && !Array.isArray(value) ? (value as Record<string, unknown>) : { value };
  } catch {
    return {};
  }
}
