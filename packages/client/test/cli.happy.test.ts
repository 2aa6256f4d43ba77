import assert from 'node:assert/strict';
import { test } from 'node:test';
import { runCli } from '../../../src/testing/cli.ts';
import { listeningApp } from './server.ts';

/** The user commands of `agent-channel` (bin/agent-channel.js), as a script runs them, against the real server. */
const served = listeningApp({ waitCeilingMs: 1000 });

async function as(agents = 1) {
  const account = await served.account(agents);
  const env = { AGENT_CHANNEL_URL: served.url, AGENT_CHANNEL_KEY: account.user.key };
  return { ...account, cli: (...args: string[]) => runCli(env, ...args) };
}

test('send --json prints the send result; a slow turn is waited for; exit 0', async () => {
  const { cli } = await as();
  const sent = await cli('send', '!sleep 1500 hello there', '--json');
  assert.equal(sent.code, 0, sent.stderr);
  const result = JSON.parse(sent.stdout);
  assert.equal(result.reply, 'You said: hello there');
  assert.match(result.session_id, /^ses_/);
  const plain = await cli('send', 'and again', '--session', result.session_id);
  assert.deepEqual([plain.code, plain.stdout], [0, 'You said: and again\n']);
  const noWait = await cli('send', '!sleep 3000 later', '--no-wait', '--json');
  assert.equal(JSON.parse(noWait.stdout).status, 'processing');
  const transcript = await cli('transcript', result.session_id, '--json');
  assert.deepEqual(transcript.stdout.trim().split('\n').map((line) => JSON.parse(line).text),
    ['!sleep 1500 hello there', 'You said: hello there', 'and again', 'You said: and again']);
});

test('exit codes: 2 usage, 3 a problem (its code said)', async () => {
  const { cli } = await as(2);
  assert.equal((await cli('send')).code, 2);
  assert.equal((await runCli({ AGENT_CHANNEL_URL: served.url, AGENT_CHANNEL_KEY: '' }, 'send', 'hi')).code, 2, 'no key');
  const several = await cli('send', 'hi', '--json');
  assert.equal(several.code, 3);
  assert.match(several.stderr, /agent_required/);
  assert.equal(JSON.parse(several.stdout).code, 'agent_required', '--json prints the problem body');
  const unknown = await cli('transcript', 'ses_nope');
  assert.deepEqual([unknown.code, /session_not_found/.test(unknown.stderr)], [3, true]);
  const bad = await runCli({ AGENT_CHANNEL_URL: served.url, AGENT_CHANNEL_KEY: 'ak_wrong_key' }, 'actions');
  assert.equal(bad.code, 3);
  assert.ok(!bad.stderr.includes('ak_wrong_key'), 'the key is never echoed');
});

test('exit codes: 4 the agent failed, 6 the timeout, 1 nobody answers', async () => {
  const { cli, agentIds } = await as(1);
  assert.equal((await cli('send', '!fail', '--agent', agentIds[0]!)).code, 4);
  const slow = await cli('send', '!sleep 5000 slow', '--agent', agentIds[0]!, '--timeout', '1');
  assert.equal(slow.code, 6);
  assert.match(slow.stderr, /ses_/);
  assert.equal((await runCli({ AGENT_CHANNEL_URL: 'http://127.0.0.1:9', AGENT_CHANNEL_KEY: 'ak_a_b' }, 'questions')).code, 1, 'nobody listens');
});

test('actions, questions, cancel and events', async () => {
  const { cli } = await as();
  const drafted = JSON.parse((await cli('send', '!action email Send the report', '--json')).stdout);
  const operationId = drafted.awaiting[0].operation_id;
  assert.match((await cli('actions')).stdout, new RegExp(`^${operationId} email: Send the report`));
  const partly = await cli('actions', 'approve', 'op_nope', operationId);
  assert.equal(partly.code, 5, 'one entry failed');
  assert.deepEqual(partly.stdout.trim().split('\n'), ['op_nope not_found: No pending action with this operation_id.', `${operationId} approved`]);

  const asked = JSON.parse((await cli('send', '!ask number How many copies?', '--json')).stdout);
  const requestId = asked.awaiting[0].request_id;
  assert.match((await cli('questions')).stdout, new RegExp(`${requestId} \\(number\\) How many copies\\?`));
  const refused = await cli('questions', 'answer', requestId, 'a few');
  assert.equal(refused.code, 5);
  assert.match(refused.stdout, /not accepted/);
  const answered = await cli('questions', 'answer', requestId, '12', '--json');
  assert.equal(answered.code, 0);
  assert.deepEqual(JSON.parse(answered.stdout).results, [{ request_id: requestId, ok: true, accepted: true }]);

  const running = JSON.parse((await cli('send', '!sleep 60000', '--no-wait', '--json')).stdout);
  assert.deepEqual([(await cli('cancel', running.session_id)).stdout], ['cancelled 1 message\n']);
  const events = await cli('events', '--json');
  const types = events.stdout.trim().split('\n').map((line) => JSON.parse(line).type);
  assert.ok(types.includes('action.pending') && types.includes('question.answered') && types.at(-1) === 'turn.cancelled', types.join());
});
