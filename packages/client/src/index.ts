export { AgentChannel, type AgentChannelOptions, type Reply, type SendAndWaitOptions, type SendOptions, type TranscriptOptions } from './client.ts';
export type { ActionsApi, BulkOptions, QuestionsApi } from './bulk.ts';
export type { EventsOptions } from './events.ts';
export { ApiError, BulkError, WaitTimeoutError } from './errors.ts';
export type { RetryOptions } from './retrying-fetch.ts';
export type * from './types.ts';
export type { components, paths } from './generated/openapi.ts';
