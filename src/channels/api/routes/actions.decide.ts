import { z } from 'zod';
import { REASON_MAX_LENGTH } from '../../../domain/problems.ts';
import { DECISIONS, MAX_BULK_ENTRIES } from '../../../services/missions.ts';
import type { ApiApp, ApiContext } from '../context.ts';
import { callerOf } from '../plugins/auth.ts';
import { BODY_PROBLEMS, COMMON_PROBLEMS, EXAMPLE_IDS, problemResponse } from '../schemas.ts';

/**
 * A bulk body (a JSON array of entries, or `{ <key>: [...] }`) as documented in /openapi.json.
 * Fastify only checks that a body is there: the service checks the envelope (422 when it is not
 * 1–100 entries) and then each entry on its own, so that one bad entry fails alone.
 */
export function bulkBody(key: string, entry: z.ZodType, description: string) {
  const entries = z.array(entry).min(1).max(MAX_BULK_ENTRIES);
  const { $schema: _dialect, ...documented } = z.toJSONSchema(z.union([entries, z.object({ [key]: entries })]), { io: 'input' }) as Record<string, unknown>;
  return z.unknown().meta({ ...documented, description });
}

export const DecisionEntryDoc = z.object({
  operation_id: z.string().meta({ description: 'The action to settle (from GET /actions).', example: EXAMPLE_IDS.action }),
  decision: z.enum(DECISIONS).meta({
    description: '`approve`; `approve_same_type` (also every other pending action of the same kind for the same agent that you own); or `reject`.',
  }),
  reason: z.string().max(REASON_MAX_LENGTH).nullable().optional().meta({
    description: 'With `reject`: the agent re-plans around it. Without one (omitted, null or blank), a rejection stops the mission. '
      + 'Ignored (and not stored) with `approve` and `approve_same_type`. At most 2000 characters (Unicode code points).',
    example: 'Not to the whole list, only to the team.',
  }),
});

const EntryErrorSchema = (codes: [string, ...string[]]) => z.object({
  code: z.enum(codes).meta({ description: 'Stable machine-readable code.' }),
  message: z.string(),
});

export const DecisionResultSchema = z.union([
  z.object({
    operation_id: z.string(),
    ok: z.literal(true),
    outcome: z.enum(['approved', 'rejected']),
    also_approved: z.array(z.string()).meta({ description: 'Other actions approved by `approve_same_type` (empty otherwise).' }),
  }),
  z.object({
    operation_id: z.string().nullable().meta({ description: 'As sent; null when the entry had no operation_id string.' }),
    ok: z.literal(false),
    error: EntryErrorSchema(['not_found', 'already_settled', 'invalid_decision']).meta({
      description: '`not_found`: no such action of yours (or it was closed); `already_settled`: decided before; `invalid_decision`: the entry is malformed.',
    }),
  }),
]).meta({ id: 'DecisionResult' });

/** §5 Decide on pending actions, 1–100 at a time; one result per entry, in order. */
export function decideActionsRoute(app: ApiApp, ctx: ApiContext): void {
  app.post('/actions/decisions', {
    // Unstorable text (U+0000, a lone surrogate) fails only the entry holding it (invalid_decision), not the request.
    config: { perEntryTextCheck: true },
    schema: {
      operationId: 'decideActions',
      tags: ['Missions'],
      summary: 'Approve or reject pending actions',
      description: 'Settles each entry on its own: one bad entry never fails the others. An approval runs the action and the mission goes on; '
        + 'a rejection with a reason makes the agent re-plan, without one it stops the mission. Each outcome appears as an agent turn in the '
        + 'session\'s transcript. When two decisions race on one action, exactly one wins; the other gets `already_settled`. '
        + 'An entry whose `operation_id` or `reason` holds the NUL character (U+0000) or a lone UTF-16 surrogate is `invalid_decision` (a field no route reads is ignored).',
      body: bulkBody('decisions', DecisionEntryDoc, 'A JSON array of 1–100 decisions, or `{ "decisions": [...] }`.'),
      response: {
        200: z.object({ results: z.array(DecisionResultSchema) }).describe('One result per entry, in order; one bad entry never fails the others.'),
        ...COMMON_PROBLEMS,
        ...BODY_PROBLEMS,
        422: problemResponse('validation_failed: the body is not an array (or `{decisions}`) of 1–100 entries'),
      },
    },
  }, async (request) => ctx.missions.decide(callerOf(request).userId, request.body));
}
