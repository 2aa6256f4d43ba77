import yoctoSpinner from 'yocto-spinner';
import type { AgentChannel } from '../index.ts';
import { BulkError } from '../errors.ts';
import type { AnswerResult, DecisionResult } from '../types.ts';
import { EXIT, printMessage, printSendResult, UsageError, type Io } from './output.ts';

/** The parsed command line of one user command. */
export interface Invocation {
  words: string[];
  flags: { session?: string; agent?: string; reason?: string; after?: string; timeout?: string; 'no-wait'?: boolean; follow?: boolean };
  io: Io;
  client: AgentChannel;
  signal: AbortSignal;
}

const one = (words: string[], what: string): string => {
  if (words.length !== 1) throw new UsageError(`expected ${what}${words.length > 1 ? `, got ${words.length} words (quote the text)` : ''}`);
  return words[0]!;
};

export async function send({ words, flags, io, client, signal }: Invocation): Promise<number> {
  const text = one(words, 'the message text');
  const target = { sessionId: flags.session, agentId: flags.agent, signal };
  if (flags['no-wait']) {
    printSendResult(io, await client.send(text, { ...target, waitSeconds: 0 }));
    return EXIT.ok;
  }
  const timeoutMs = flags.timeout === undefined ? undefined : Number(flags.timeout) * 1000;
  if (timeoutMs !== undefined && !(timeoutMs > 0)) throw new UsageError('--timeout takes a number of seconds');
  // A spinner only for a person watching: never on a pipe or in --json output.
  const spinner = !io.json && process.stdout.isTTY && process.stderr.isTTY ? yoctoSpinner({ text: 'the agent is working…' }).start() : null;
  try {
    const reply = await client.sendAndWait(text, { ...target, timeoutMs });
    spinner?.stop();
    printSendResult(io, reply);
    return reply.error ? EXIT.agentFailed : EXIT.ok;
  } finally {
    spinner?.stop();
  }
}

export async function transcript({ words, flags, io, client, signal }: Invocation): Promise<number> {
  const sessionId = one(words, 'a session id');
  for await (const page of client.transcript(sessionId, { follow: flags.follow ?? false, signal })) {
    for (const message of page.messages) printMessage(io, message);
  }
  return EXIT.ok;
}

export async function cancel({ words, io, client, signal }: Invocation): Promise<number> {
  const result = await client.cancel(one(words, 'a session id'), { signal });
  io.out(io.json ? JSON.stringify(result) : `cancelled ${result.cancelled} message${result.cancelled === 1 ? '' : 's'}`);
  return EXIT.ok;
}

export async function events({ flags, io, client, signal }: Invocation): Promise<number> {
  const print = (event: { id: string; type: string; session_id: string; data: unknown }) =>
    io.out(io.json ? JSON.stringify(event) : `${event.id} ${event.type} ${event.session_id} ${JSON.stringify(event.data)}`);
  if (flags.follow) {
    for await (const event of client.events({ after: flags.after, sessionId: flags.session, signal })) print(event);
    return EXIT.ok;
  }
  let after = flags.after;
  for (;;) {
    const page = await client.eventsPage({ after, sessionId: flags.session, limit: 200, signal });
    page.events.forEach(print);
    if (!page.has_more || page.events.length === 0) return EXIT.ok;
    after = page.events.at(-1)!.id;
  }
}

export async function actions({ words, flags, io, client, signal }: Invocation): Promise<number> {
  const [verb, ...ids] = words;
  if (verb === undefined) {
    const list = await client.actions.list({ sessionId: flags.session, signal });
    if (io.json) io.out(JSON.stringify({ actions: list }));
    else for (const a of list) io.out(`${a.operation_id} ${a.kind}: ${a.summary} (session ${a.session_id})`);
    return EXIT.ok;
  }
  if (ids.length === 0) throw new UsageError(`actions ${verb} takes one or more operation ids`);
  const options = { strict: true, signal };
  const settle = async (): Promise<DecisionResult[]> => {
    if (verb === 'approve') return client.actions.approve(ids, options);
    if (verb === 'approve-all') return client.actions.approveSameType(ids, options);
    if (verb === 'reject') return client.actions.reject(ids, flags.reason, options);
    throw new UsageError(`actions takes approve, approve-all or reject, not "${verb}"`);
  };
  return printResults(io, await settle().catch(bulkResults<DecisionResult>), (r) =>
    r.ok ? `${r.operation_id} ${r.outcome}${r.also_approved.length > 0 ? ` (also approved: ${r.also_approved.join(', ')})` : ''}` : `${r.operation_id} ${r.error.code}: ${r.error.message}`);
}

export async function questions({ words, io, client, signal }: Invocation): Promise<number> {
  const [verb, requestId, ...text] = words;
  if (verb === undefined) {
    const list = await client.questions.list({ signal });
    if (io.json) io.out(JSON.stringify({ questions: list }));
    else for (const q of list) io.out(`${q.request_id} (${q.answer_type}) ${q.text}`);
    return EXIT.ok;
  }
  if (verb !== 'answer' || requestId === undefined || text.length !== 1) throw new UsageError('questions answer takes a request id and the answer (quoted)');
  const results = await client.questions.answerAll([{ request_id: requestId, text: text[0]! }], { strict: true, signal }).catch(bulkResults<AnswerResult>);
  return printResults(io, results, (r) =>
    r.ok ? `${r.request_id} ${r.accepted ? 'accepted' : `not accepted: ${r.reason}`}` : `${r.request_id} ${r.error.code}: ${r.error.message}`);
}

/** A strict bulk call's failure still carries every result: print them all, then exit 5. */
function bulkResults<R extends DecisionResult | AnswerResult>(error: unknown): R[] & { partly?: true } {
  if (!(error instanceof BulkError)) throw error;
  return Object.assign(error.results as R[], { partly: true as const });
}

function printResults<R>(io: Io, results: R[] & { partly?: true }, line: (result: R) => string): number {
  if (io.json) io.out(JSON.stringify({ results }));
  else results.forEach((result) => io.out(line(result)));
  return results.partly ? EXIT.partly : EXIT.ok;
}
