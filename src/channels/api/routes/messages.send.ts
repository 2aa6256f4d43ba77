import { z } from 'zod';
import { checkMessageText, Problem } from '../../../domain/problems.ts';
import { SendMessageSchema, SendResultSchema } from '../../../services/conversations/schemas.ts';
import type { ApiApp, ApiContext } from '../context.ts';
import { API_PREFIX } from '../../api-prefix.ts';
import { callerOf } from '../../key-auth.ts';
import { BODY_PROBLEMS, COMMON_PROBLEMS, problemResponse } from '../schemas.ts';
import type { RouteResponseHeaders } from '../openapi.ts';
import { hangUpSignal } from '../../hang-up.ts';
import { sentMoreThanOnce } from '../../repeated-header.ts';
import { heldWait } from '../prefer-wait.ts';

const SendHeaders = z.object({
  'idempotency-key': z.string().min(1).max(255).optional().meta({
    description: 'A retry with the same key and body within the server\'s window (`IDEMPOTENCY_TTL_HOURS`, 24 h by default) starts no turn and returns the first outcome as it stands now.',
  }),
  // No length bound of its own: Node bounds header sizes, and RFC 7240 says to ignore what is not understood.
  prefer: z.string().optional().meta({ description: 'RFC 7240, e.g. `wait=5`: wait at most that many seconds (capped by the server ceiling).' }),
});

/** §1 Send a message: the reply at once, or 202 with where to poll for it. */
export function sendMessageRoute(app: ApiApp, ctx: ApiContext): void {
  app.post('/messages', {
    schema: {
      operationId: 'sendMessage',
      tags: ['Messages'],
      summary: 'Send a message to an agent',
      description: 'Waits for the reply up to the server ceiling (or `Prefer: wait=N`). 200 `completed` with the reply; 202 `processing`/`queued` with `Location` pointing at the transcript; 200 `duplicate` for the same text to the same target within the duplicate window.',
      headers: SendHeaders,
      body: SendMessageSchema,
      response: {
        200: SendResultSchema.describe('completed, or duplicate'),
        202: SendResultSchema.describe('processing or queued; poll the transcript at Location'),
        ...COMMON_PROBLEMS,
        ...BODY_PROBLEMS,
        404: problemResponse('session_not_found or agent_not_found'),
        422: problemResponse('`text_empty` (`text` missing, not a string, as in `{"text": 5}`, or blank), `text_too_long` (over 32,000 characters), `agent_required` (no `agent_id`, and you can message several agents), '
          + '`idempotency_key_reused` (the key came with a different body), or `validation_failed` (another field of the wrong type, or a field that holds the NUL character or a lone surrogate, or `Idempotency-Key` was sent twice; `errors` names it).'),
        409: problemResponse('idempotency_key_in_use: the first request with this key is still being accepted; retry after `Retry-After` (1 s).'),
        502: problemResponse('agent_failed; carries `session_id`, and `message_ts` to read the transcript after your message (`?after=`).'),
      },
    },
    config: { responseHeaders: { 200: ['Location', 'Preference-Applied'], 202: ['Location', 'Preference-Applied'], 409: ['Retry-After'], 502: ['Preference-Applied'] } satisfies RouteResponseHeaders },
    // text rules come first among the 422s and have their own codes.
    preValidation: async (request) => {
      const body = request.body as { text?: unknown } | null;
      checkMessageText(body && typeof body === 'object' && !Array.isArray(body) ? body.text : undefined);
    },
  }, async (request, reply) => {
    // Node joins two Idempotency-Key lines into one key ("a, b"): a key neither line named.
    if (sentMoreThanOnce(request.raw.rawHeaders, 'idempotency-key')) {
      throw Problem.validation([{ path: 'idempotency-key', message: 'must be sent once' }]);
    }
    // Preference-Applied on every outcome of the send, 502 included.
    const hold = heldWait(request.headers.prefer, ctx.conversations.waitCeilingMs);
    if (hold) reply.header('Preference-Applied', hold.applied);
    let result;
    try {
      result = await ctx.conversations.submit({
        userId: callerOf(request).userId,
        channel: 'api',
        text: request.body.text,
        sessionId: request.body.session_id,
        agentId: request.body.agent_id,
        idempotencyKey: request.headers['idempotency-key'],
        waitMs: hold?.waitMs,
        // A client that hangs up stops the wait (its message stays accepted and is answered).
        signal: hangUpSignal(request, reply),
      });
    } catch (error) {
      // Only an accepted message had its preference applied; a refused one (4xx) did not wait at all.
      if (!(error instanceof Problem && error.code === 'agent_failed')) reply.removeHeader('Preference-Applied');
      throw error;
    }
    const transcript = `${API_PREFIX}/sessions/${result.session_id}/messages`;
    if (result.status === 'processing' || result.status === 'queued') {
      reply.header('Location', transcript);
      return reply.code(202).send(result);
    }
    // A duplicate whose original has no reply yet: where it will land, as a 202 says it.
    if (result.status === 'duplicate' && result.reply === undefined) reply.header('Location', transcript);
    return reply.code(200).send(result);
  });
}
