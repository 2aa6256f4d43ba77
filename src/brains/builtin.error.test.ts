import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { listQuestions, send, unique } from '../testing/missions.ts';
import { API, startTestApp, type TestApp } from '../testing/harness.ts';
import type { BrainContext } from './brain.ts';
import { BuiltinBrain, MAX_SLEEP_MS } from './builtin.ts';

/** §8: what the built-in agent refuses or limits. */
let t: TestApp;
before(async () => { t = await startTestApp(); });
after(async () => { await t.close(); });

test('!fail <text> fails the turn whatever the text: 502 agent_failed, and nothing of the text is echoed', async () => {
  const u = await t.userWithAgent();
  const res = await t.inject({ method: 'POST', url: `${API}/messages`, headers: u.auth, payload: { text: unique('!fail the rest is ignored') } });
  assert.equal(res.statusCode, 502, res.body);
  assert.equal(res.json().code, 'agent_failed');
  assert.match(res.json().session_id, /^ses_/);
  assert.doesNotMatch(res.body, /the rest is ignored/);
  // "!failure" is not the directive: it is plain text.
  const plain = await send(t, u, unique('!failure is not a directive'));
  assert.match(plain.reply, /^You said: !failure is not a directive/);
});

for (const [what, type] of [
  ['an unknown type', 'colour'],
  ['a choice with an empty option', 'choice:red||blue'],
  ['a choice with an empty last option', 'choice:red|'],
  ['a choice with no options', 'choice:'],
] as const) {
  test(`!ask with ${what} asks nothing and names the type it cannot ask`, async () => {
    const u = await t.userWithAgent();
    const sent = await send(t, u, `!ask ${type} ${unique('Which one?')}`);
    assert.match(sent.reply, new RegExp(`can't ask a question of type "${type.replace(/[|]/g, '\\|')}"`));
    assert.match(sent.reply, /text, number, date, email, yesno or choice:a\|b\|c/);
    assert.doesNotMatch(sent.reply, /req_/);
    assert.deepEqual((await listQuestions(t, u)).json(), { questions: [], has_more: false });
    const rows = await t.runtime.store.db.selectFrom('questions').select('id').where('owner_user_id', '=', u.id).execute();
    assert.equal(rows.length, 0);
  });
}

test('a directive with only whitespace where its summary or question goes is plain text: nothing drafted, nothing asked', async () => {
  const u = await t.userWithAgent();
  for (const text of ['!action email    ', '!action email \n\t ', '!ask text   ', `!ask-user ${u.email} text  \n`]) {
    const sent = await send(t, u, text);
    assert.equal(sent.reply, `You said: ${text}`, JSON.stringify(text));
  }
  const drafted = await t.runtime.store.db.selectFrom('actions').select('id').where('owner_user_id', '=', u.id).execute();
  assert.equal(drafted.length, 0);
  assert.deepEqual((await listQuestions(t, u)).json(), { questions: [], has_more: false });
});

test('!ask-user with an unknown type asks nobody', async () => {
  const u = await t.userWithAgent();
  const sent = await send(t, u, `!ask-user ${u.email} choice:a||b ${unique('Which?')}`);
  assert.match(sent.reply, /can't ask a question of type/);
  assert.deepEqual((await listQuestions(t, u)).json(), { questions: [], has_more: false });
});

test(`!sleep works at most ${MAX_SLEEP_MS} ms: a longer sleep is cut to the cap (on a mock clock)`, async (ctx) => {
  const context: BrainContext = {
    jobId: 1, agentId: 'agt_test', sessionId: 'ses_test', senderUserId: 'usr_test', signal: new AbortController().signal,
    history: async () => [], newOperationId: () => 'op_test', newRequestId: () => 'req_test',
    findWorkspaceMember: async () => null, runTool: async () => {}, toolFor: () => ({ needsPermission: true }),
  };
  ctx.mock.timers.enable({ apis: ['setTimeout'] });
  let reply: string | null = null;
  const pending = new BuiltinBrain().respond({ kind: 'message', text: '!sleep 99999999999 then this' }, context)
    .then((result) => { reply = result.reply; });
  ctx.mock.timers.tick(MAX_SLEEP_MS - 1);
  await new Promise((resolve) => setImmediate(resolve)); // every microtask has run: an early wake-up would show
  assert.equal(reply, null, 'still asleep just before the cap');
  ctx.mock.timers.tick(1);
  await pending;
  assert.equal(reply, 'You said: then this');

  let capped: string | null = null;
  const alone = new BuiltinBrain().respond({ kind: 'message', text: `!sleep ${MAX_SLEEP_MS + 1}` }, context).then((r) => { capped = r.reply; });
  ctx.mock.timers.tick(MAX_SLEEP_MS);
  await alone;
  assert.equal(capped, `Slept ${MAX_SLEEP_MS} ms.`);
});
