import { ApiError, BulkError, WaitTimeoutError } from '../index.ts';
import type { AwaitingItem, SendResult, TranscriptMessage } from '../types.ts';

/** The exit codes scripts can rely on (listed in the usage and in docs/cli-client.md). */
export const EXIT = { ok: 0, failed: 1, usage: 2, refused: 3, agentFailed: 4, partly: 5, timedOut: 6 } as const;

export class UsageError extends Error {}

export interface Io {
  out(line: string): void;
  err(line: string): void;
  json: boolean;
}

export function printMessage(io: Io, message: TranscriptMessage): void {
  if (io.json) io.out(JSON.stringify(message));
  else io.out(`${message.ts} ${message.role}: ${message.text}${message.error ? ` [${message.error}]` : ''}`);
}

/** What the agent waits for, and the command that settles it. */
export function describeAwaiting(item: AwaitingItem): string {
  return item.type === 'action'
    ? `awaiting your permission: ${item.kind}: ${item.summary} (agent-channel actions approve ${item.operation_id})`
    : `awaiting your answer (${item.answer_type}): ${item.text} (agent-channel questions answer ${item.request_id} "…")`;
}

export function printSendResult(io: Io, result: SendResult): void {
  if (io.json) return io.out(JSON.stringify(result));
  if (result.reply !== undefined) io.out(result.reply);
  else io.err(`${result.status}: session ${result.session_id} (agent-channel transcript ${result.session_id} --follow)`);
  for (const item of result.awaiting) io.err(describeAwaiting(item));
}

/** An error as one line on stderr (or its problem as JSON on stdout with --json), and its exit code. */
export function report(io: Io, error: unknown): number {
  if (error instanceof UsageError) {
    io.err(`agent-channel: ${error.message}`);
    return EXIT.usage;
  }
  if (error instanceof ApiError) {
    if (io.json) io.out(JSON.stringify(error.problem));
    io.err(`agent-channel: ${error.code}: ${error.detail}`);
    return error.code === 'agent_failed' ? EXIT.agentFailed : error.status >= 500 ? EXIT.failed : EXIT.refused;
  }
  if (error instanceof BulkError) {
    if (io.json) io.out(JSON.stringify({ results: error.results }));
    io.err(`agent-channel: ${error.message}`);
    return EXIT.partly;
  }
  if (error instanceof WaitTimeoutError) {
    io.err(`agent-channel: ${error.message}`);
    return EXIT.timedOut;
  }
  io.err(`agent-channel: ${(error as Error)?.message ?? String(error)}${(error as Error)?.cause ? ` (${String((error as { cause: Error }).cause.message ?? (error as { cause: unknown }).cause)})` : ''}`);
  return EXIT.failed;
}
