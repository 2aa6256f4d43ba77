import { z } from 'zod';
import { TEXT_MAX_LENGTH } from '../../domain/problems.ts';
import { TS_PATTERN } from '../../domain/turn-clock.ts';
import { AwaitingSchema } from '../missions/schemas.ts';

/**
 * The shapes conversations give (contract §1, §4), each defined once: the service's types are
 * inferred from them, and the API channel documents them as they are.
 */

/** What a channel sends (§1): the API's body, the MCP tool's arguments. */
export const SendMessageSchema = z.object({
  // Checked by checkMessageText (422 text_empty / text_too_long, codes of their own); the bounds document it.
  text: z.string().meta({
    description: 'The message, 1–32,000 characters (Unicode code points), not blank.', example: 'Summarise my unread email.', minLength: 1, maxLength: TEXT_MAX_LENGTH,
  }),
  // No length bound of their own (the body's 1 MiB bounds them): an id that cannot be one is
  // simply not found, as on every other route.
  session_id: z.string().min(1).optional().meta({ description: 'Continue this session (it keeps its agent). An unknown id is 404 session_not_found; 404 agent_not_found once you are no longer a member of its agent\'s workspace.' }),
  agent_id: z.string().min(1).optional().meta({ description: 'For a new session: the agent to talk to. Optional when you can message only one agent. An unknown id is 404 agent_not_found.' }),
  // The example is a request that works as it is (the docs page fills it in): a new session with your only agent.
}).meta({ example: { text: 'Summarise my unread email.' } });
export type SendMessageInput = z.infer<typeof SendMessageSchema>;

/** A transcript read's `after` (§4): the API's query parameter, the MCP tool's argument. Validated by the transcript (a real date and time, in the one format a ts has); the pattern documents the format. */
export const TurnCursorSchema = z.string().max(64).meta({
  description: 'A turn `ts` (RFC 3339 UTC with exactly six fractional digits); only newer turns are returned.',
  example: '2026-11-22T12:34:56.789012Z', pattern: TS_PATTERN.source,
});

export const SendResultSchema = z.object({
  session_id: z.string(),
  status: z.enum(['completed', 'processing', 'queued', 'duplicate']),
  agent_id: z.string(),
  message_ts: z.string().meta({ description: 'ts of your message in the transcript.' }),
  reply: z.string().optional().meta({ description: 'Present when completed (or a duplicate whose original finished).' }),
  reply_ts: z.string().optional(),
  error: z.string().optional().meta({
    description: '`cancelled` on a message cancelled while it waited (`reply` is then `Cancelled.`, §9.4); on a duplicate of a message the agent failed on, its error (e.g. `agent_failed`), `reply` being the error turn of the transcript.',
  }),
  awaiting: AwaitingSchema,
}).meta({ id: 'SendResult' });
export type SendResult = z.infer<typeof SendResultSchema>;
export type SendStatus = SendResult['status'];

export const TranscriptSchema = z.object({
  session_id: z.string(),
  agent_id: z.string(),
  status: z.enum(['idle', 'processing', 'queued']),
  messages: z.array(z.object({
    role: z.enum(['user', 'agent']),
    text: z.string(),
    ts: z.string().meta({ description: 'RFC 3339 UTC with six fractional digits; unique and increasing in the session.' }),
    error: z.string().optional().meta({ description: 'Set on an agent turn that reports a failure, e.g. agent_failed.' }),
  })),
  has_more: z.boolean(),
  awaiting: AwaitingSchema,
}).meta({ id: 'Transcript' });
export type TranscriptResult = z.infer<typeof TranscriptSchema>;
