import * as prompts from '@clack/prompts';
import yoctoSpinner from 'yocto-spinner';
import { ApiError, type AgentChannel } from '../index.ts';
import type { AwaitingItem, DecisionResult, Transcript } from '../types.ts';
import type { Invocation } from './commands.ts';
import { EXIT, UsageError } from './output.ts';

/**
 * The interactive loop: a message, a spinner while the agent works, its reply; then whatever it
 * waits for (an action to approve or reject, a question to answer) asked for inline, and the
 * agent's next turn awaited in the same way. Ctrl-C or an empty line with /quit ends it.
 */
export async function chat({ words, flags, client, signal }: Invocation): Promise<number> {
  if (words.length > 0) throw new UsageError('chat takes no words: type the messages once it runs');
  if (!process.stdin.isTTY || !process.stdout.isTTY) throw new UsageError('chat needs a terminal: use `agent-channel send` in scripts');
  let sessionId = flags.session;
  let after: string | undefined;
  prompts.intro(sessionId ? `agent-channel: session ${sessionId}` : 'agent-channel: a new conversation (/quit to leave)');
  for (;;) {
    const text = await prompts.text({ message: 'You', placeholder: 'a message, or /quit', validate: (v) => (v?.trim() ? undefined : 'Type a message (or /quit).') });
    if (prompts.isCancel(text) || text.trim() === '/quit') break;
    let reply;
    try {
      reply = await working(() => client.sendAndWait(text, { sessionId, agentId: sessionId ? undefined : flags.agent, signal }));
    } catch (error) {
      if (!(error instanceof ApiError)) throw error;
      prompts.log.error(`${error.code}: ${error.detail}`); // the agent failed, or the server refused: say so and go on
      sessionId ??= error.problem.session_id;
      continue;
    }
    sessionId = reply.session_id;
    after = reply.reply_ts;
    showAgent(reply.reply, reply.error);
    let awaiting = reply.awaiting;
    while (awaiting.length > 0) {
      const settled = await settle(client, awaiting[0]!);
      if (settled === 'quit') return goodbye(sessionId);
      if (settled === 'later') break;
      const next = await working(() => nextAgentTurn(client, sessionId!, after!, signal));
      after = next.messages.at(-1)!.ts;
      for (const message of next.messages) if (message.role === 'agent') showAgent(message.text, message.error);
      awaiting = next.awaiting;
    }
  }
  return goodbye(sessionId);
}

function goodbye(sessionId: string | undefined): number {
  prompts.outro(sessionId ? `session ${sessionId} (agent-channel chat --session ${sessionId} to go on)` : 'bye');
  return EXIT.ok;
}

function showAgent(text: string, error: string | undefined): void {
  if (error) prompts.log.error(`Agent: ${text} [${error}]`);
  else prompts.log.message(`Agent: ${text}`);
}

/** Runs `work` under a spinner. */
async function working<T>(work: () => Promise<T>): Promise<T> {
  const spinner = yoctoSpinner({ text: 'the agent is working…' }).start();
  try {
    return await work();
  } finally {
    spinner.stop();
  }
}

/** The session's turns after `after` up to and including the agent's next one (held, not polled). */
async function nextAgentTurn(client: AgentChannel, sessionId: string, after: string, signal: AbortSignal): Promise<Transcript> {
  const messages: Transcript['messages'] = [];
  for await (const page of client.transcript(sessionId, { after, follow: true, signal })) {
    messages.push(...page.messages);
    if (page.messages.some((m) => m.role === 'agent')) return { ...page, messages };
  }
  throw new Error('the transcript ended');
}

/** Asks the person about one thing the agent waits for, and settles it. */
async function settle(client: AgentChannel, item: AwaitingItem): Promise<'settled' | 'later' | 'quit'> {
  if (item.type === 'action') {
    const choice = await prompts.select({
      message: `The agent asks to run ${item.kind}: ${item.summary}`,
      options: [
        { value: 'approve', label: 'Approve' },
        { value: 'approve-all', label: `Approve, and every other pending ${item.kind} of this agent` },
        { value: 'reject-reason', label: 'Reject, saying why (the agent re-plans)' },
        { value: 'reject', label: 'Reject (the mission stops)' },
        { value: 'later', label: 'Decide later' },
      ],
    });
    if (prompts.isCancel(choice)) return 'quit';
    if (choice === 'later') return 'later';
    let results: DecisionResult[];
    if (choice === 'approve') results = await client.actions.approve(item.operation_id);
    else if (choice === 'approve-all') results = await client.actions.approveSameType(item.operation_id);
    else {
      let reason: string | undefined;
      if (choice === 'reject-reason') {
        const given = await prompts.text({ message: 'Why not?', validate: (v) => (v?.trim() ? undefined : 'Say why, for the agent.') });
        if (prompts.isCancel(given)) return 'quit';
        reason = given;
      }
      results = await client.actions.reject(item.operation_id, reason);
    }
    // Settled meanwhile elsewhere (the web app, Telegram, another terminal): said, and the chat goes on.
    for (const result of results) {
      if (!result.ok) {
        prompts.log.warn(`${result.error.code}: ${result.error.message}`);
        return 'later';
      }
    }
    return 'settled';
  }
  for (;;) {
    const answer = await prompts.text({ message: `The agent asks: ${item.text} (${item.answer_type})`, validate: (v) => (v?.trim() ? undefined : 'Type an answer.') });
    if (prompts.isCancel(answer)) return 'quit';
    const result = await client.questions.answer(item.request_id, answer, { strict: false });
    if (!result.ok) {
      prompts.log.warn(`${result.error.code}: ${result.error.message}`);
      return 'later';
    }
    if (result.accepted) return 'settled';
    prompts.log.warn(`Not accepted: ${result.reason ?? ''}`);
  }
}
