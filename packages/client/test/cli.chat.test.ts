import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { after, test } from 'node:test';
import { CLI_PATH } from '../../../src/testing/cli.ts';
import { listeningApp } from './server.ts';

/**
 * `agent-channel chat` in a real pseudo-terminal (tmux): a person types messages, approves an
 * action, answers a question (a first answer that does not fit, then one that does) and rejects
 * an action with a reason, all inline; the transcript on the server then shows that conversation.
 */
const served = listeningApp();
const socket = `agent-channel-chat-test-${process.pid}`;
const tmux = (...args: string[]) => execFileSync('tmux', ['-L', socket, ...args], { encoding: 'utf8' });
after(() => { try { tmux('kill-server'); } catch { /* already gone */ } });

const screen = () => tmux('capture-pane', '-p', '-J', '-t', 'chat', '-S', '-500');
async function until(pattern: RegExp, timeoutMs = 40_000): Promise<RegExpMatchArray> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const match = pattern.exec(screen());
    if (match) return match;
    if (Date.now() > deadline) throw new Error(`${pattern} never appeared:\n${screen()}`);
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}
const type = (text: string) => { tmux('send-keys', '-t', 'chat', '-l', text); tmux('send-keys', '-t', 'chat', 'Enter'); };
const press = (...keys: string[]) => { for (const key of keys) tmux('send-keys', '-t', 'chat', key); };
const count = (pattern: RegExp) => screen().match(new RegExp(pattern, 'g'))?.length ?? 0;

test('chat: a conversation with an approval, a question and a rejection with a reason, in a terminal', { timeout: 180_000 }, async () => {
  const { client, user } = await served.account(1);
  const quoted = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;
  const command = `env AGENT_CHANNEL_URL=${quoted(served.url)} AGENT_CHANNEL_KEY=${quoted(user.key)} ${quoted(process.execPath)} ${quoted(CLI_PATH)} chat; echo "EXIT=$?"; sleep 600`;
  tmux('new-session', '-d', '-s', 'chat', '-x', '140', '-y', '60', command);

  await until(/You/);
  type('hello');
  await until(/Agent: You said: hello/);

  type('!action email Send the report');
  await until(/The agent asks to run email: Send the report/);
  press('Enter'); // Approve, the first choice
  await until(/Agent: Done: Send the report/);

  type('!ask number How many copies?');
  await until(/The agent asks: How many copies\? \(number\)/);
  type('a few');
  await until(/Not accepted: .*number/i);
  type('12');
  await until(/Agent: Noted: 12/);

  type('!action call Phone the bank');
  await until(/The agent asks to run call: Phone the bank/);
  press('Down', 'Down', 'Enter'); // Reject, saying why
  await until(/Why not\?/);
  type('Email them instead');
  await until(/Agent: Re-planned: Email them instead/);

  const waited = count(/Agent: /);
  type('/quit');
  const [, sessionId] = await until(/session (ses_\w+)/);
  await until(/EXIT=0/);
  assert.equal(count(/Agent: /), waited);

  const texts: string[] = [];
  for await (const page of client.transcript(sessionId!)) texts.push(...page.messages.map((m) => `${m.role}: ${m.text.replace(/\((operation_id|request_id) \w+[^)]*\)/, '(…)')}`));
  assert.deepEqual(texts, [
    'user: hello', 'agent: You said: hello',
    'user: !action email Send the report', 'agent: I need your permission to run "email": Send the report (…). Approve or reject it.',
    'agent: Done: Send the report',
    'user: !ask number How many copies?', 'agent: Question for you: How many copies? (…).',
    'agent: Noted: 12',
    'user: !action call Phone the bank', 'agent: I need your permission to run "call": Phone the bank (…). Approve or reject it.',
    'agent: Re-planned: Email them instead',
  ]);
  assert.deepEqual(await client.actions.list(), []);
  assert.deepEqual(await client.questions.list(), []);
});
