import { z } from 'zod';
import { AwaitingSchema } from '../missions/schemas.ts';

/**
 * The shapes conversations give (contract §1, §4), each defined once: the service's types are
 * inferred from them, and the API channel documents them as they are.
 */

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
