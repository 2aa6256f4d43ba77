import type { components } from './generated/openapi.ts';

/** The API's shapes, named once: each is the server's own schema (see generated/openapi.ts). */
type Schemas = components['schemas'];
export type Agent = Schemas['Agent'];
export type SendResult = Schemas['SendResult'];
export type Transcript = Schemas['Transcript'];
export type TranscriptMessage = Transcript['messages'][number];
export type AwaitingItem = Schemas['AwaitingItem'];
export type PendingAction = Schemas['PendingAction'];
export type OpenQuestion = Schemas['OpenQuestion'];
export type DecisionResult = Schemas['DecisionResult'];
export type AnswerResult = Schemas['AnswerResult'];
export type FeedEvent = Schemas['Event'];
export type EventPage = Schemas['EventPage'];
export type CancelResult = Schemas['CancelResult'];
export type Problem = Schemas['Problem'];
export type Decision = { operation_id: string; decision: 'approve' | 'approve_same_type' | 'reject'; reason?: string | null };
export type Answer = { request_id: string; text: string };
