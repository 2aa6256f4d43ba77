import { z } from 'zod';
import { PAGE_LIMIT } from '../../../domain/paging.ts';
import { checkMessageText } from '../../../domain/problems.ts';
import { CancelResultSchema } from '../../../services/conversations/cancelling.ts';
import { SendMessageSchema, SendResultSchema, TranscriptSchema, TurnCursorSchema } from '../../../services/conversations/schemas.ts';
import type { McpServices } from '../context.ts';
import { progressWhileWaiting } from '../progress.ts';
import { parseArguments, type ToolDefinition } from '../tool.ts';

const seconds = (ms: number): number => Math.floor(ms / 1000);

/** §1 as a tool: the reply within the ceiling, or where to wait for it. */
export function sendMessageTool(services: McpServices): ToolDefinition<typeof SendMessageSchema, typeof SendResultSchema> {
  const ceiling = seconds(services.conversations.waitCeilingMs);
  return {
    name: 'send_message',
    title: 'Send a message to an agent',
    description: `Sends \`text\` to an agent and waits up to ${ceiling} s for its reply. Give \`session_id\` to continue a conversation, `
      + 'or `agent_id` to start one (list_agents names them; with a single agent neither is needed). '
      + 'status `completed`: `reply` is the agent\'s answer. status `processing` or `queued`: the agent is still working; '
      + 'call get_messages with this `session_id`, `after` = `message_ts` and `wait_seconds` to receive the reply as soon as it is written. '
      + '`duplicate`: the same text was just sent to the same place; no new turn was started. '
      + 'When `awaiting` is not empty the agent waits for you: approve or reject its actions with decide_actions, answer its questions with answer_questions.',
    input: SendMessageSchema,
    output: SendResultSchema,
    annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: true },
    // As the API judges its body: stored-text rule, then the text's own codes (text_empty, text_too_long), then the fields.
    parse: (args) => parseArguments(SendMessageSchema, args, (value) => {
      checkMessageText(value !== null && typeof value === 'object' ? (value as { text?: unknown }).text : undefined);
    }),
    async run(args, call) {
      const stopProgress = progressWhileWaiting(call, services.conversations.waitCeilingMs);
      try {
        return await services.conversations.submit({
          userId: call.userId, channel: 'mcp', text: args.text, sessionId: args.session_id, agentId: args.agent_id, signal: call.signal,
        });
      } finally {
        stopProgress();
      }
    },
  };
}

/** §4 with §9.1 as a tool: a page of the transcript, held until a newer turn exists when asked to wait. */
export function getMessagesTool(services: McpServices) {
  const ceilingMs = services.conversations.waitCeilingMs;
  const input = z.object({
    session_id: z.string().meta({ description: 'The session_id that send_message answered with.' }),
    after: TurnCursorSchema.optional(),
    limit: z.number().int().min(PAGE_LIMIT.min).max(PAGE_LIMIT.max).optional()
      .meta({ description: `Turns per page, ${PAGE_LIMIT.min}–${PAGE_LIMIT.max} (default ${PAGE_LIMIT.default}); \`has_more\` says whether a later page exists.` }),
    wait_seconds: z.number().int().min(0).optional().meta({
      description: `With \`after\`: when no turn newer than \`after\` exists yet, wait up to this many seconds (at most ${seconds(ceilingMs)}) for one. `
        + 'Then `messages` holds it (and any others after `after`); after the wait with nothing new, `messages` is [] and `status` says what the agent is doing.',
    }),
  });
  return {
    name: 'get_messages',
    title: 'Read a conversation',
    description: 'Reads a session\'s transcript, oldest first: `messages` with `role` (user or agent), `text`, `ts`, and `error` on a failed or cancelled turn. '
      + 'To receive the reply to a message that send_message answered `processing` or `queued` for, call this with `after` = its `message_ts` and '
      + `\`wait_seconds\` (up to ${seconds(ceilingMs)}); if \`messages\` comes back empty, call it again the same way. `
      + '`status` is idle, processing or queued; `awaiting` lists the actions and questions the agent waits for.',
    input,
    output: TranscriptSchema,
    annotations: { readOnlyHint: true, openWorldHint: false },
    run: (args, call) => {
      // Only a read after a turn is held (§9.1): without `after` there is nothing to wait past.
      const hold = args.after !== undefined && args.wait_seconds !== undefined
        ? { waitMs: Math.min(args.wait_seconds * 1000, ceilingMs), signal: AbortSignal.any([call.signal, call.shutdown]) } : undefined;
      return services.conversations.transcript(call.userId, args.session_id, { after: args.after, limit: args.limit }, hold);
    },
  } satisfies ToolDefinition<typeof input, typeof TranscriptSchema>;
}

/** §9.4 as a tool. */
export function cancelTool(services: McpServices) {
  const input = z.object({ session_id: z.string().meta({ description: 'The session whose work to stop.' }) });
  return {
    name: 'cancel',
    title: 'Cancel a conversation\'s work',
    description: 'Stops a session\'s work: its queued messages leave the agent\'s line and its running turn is stopped, each answered `Cancelled.`; '
      + 'its open actions and questions are closed. `cancelled` counts the messages stopped (0 when nothing was running). '
      + 'An approved action whose tool already ran is not undone.',
    input,
    output: CancelResultSchema,
    annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: true, openWorldHint: false },
    run: (args, call) => services.conversations.cancel(call.userId, args.session_id),
  } satisfies ToolDefinition<typeof input, typeof CancelResultSchema>;
}
