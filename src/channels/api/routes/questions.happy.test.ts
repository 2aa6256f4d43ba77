import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import {
  agentTexts, answerOne, askQuestion, listQuestions, memberOfOwnersWorkspace, postAnswers, send, settledTranscript, transcript, unique,
} from '../../../testing/missions.ts';
import { newId } from '../../../domain/ids.ts';
import { startTestApp, type TestApp } from '../../../testing/harness.ts';

let t: TestApp;
before(async () => { t = await startTestApp(); });
after(async () => { await t.close(); });

const questionRow = async (requestId: string) => ({
  ...(await t.runtime.store.db.selectFrom('questions').innerJoin('missions', 'missions.id', 'questions.mission_id')
    .select(['questions.status as question', 'questions.answer', 'missions.status as mission'])
    .where('questions.id', '=', requestId).executeTakeFirstOrThrow()),
});

test('!ask opens a question to the sender that GET /questions lists with every field of §6; the session goes idle', async () => {
  const owner = await t.userWithAgent();
  const text = unique('How many copies?');
  const asked = await askQuestion(t, owner, 'number', text);
  assert.match(asked.reply, new RegExp(`request_id ${asked.requestId}`));
  const now = await transcript(t, owner, asked.sessionId);
  assert.equal(now.status, 'idle');

  const res = await listQuestions(t, owner);
  assert.equal(res.statusCode, 200);
  const { questions } = res.json();
  assert.equal(questions.length, 1);
  const [q] = questions;
  assert.equal(q.request_id, asked.requestId);
  assert.match(q.request_id, /^req_/);
  assert.equal(q.text, text);
  assert.equal(q.session_id, asked.sessionId);
  assert.equal(q.agent_id, owner.agentId);
  assert.match(q.mission_id, /^msn_/);
  assert.equal(q.asked_of, owner.id);
  assert.equal(q.answer_type, 'number', 'answer_type tells what kind of answer fits');
  assert.match(q.created_at, /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$/);
  // The open question suspends the mission, not the agent.
  assert.match((await send(t, owner, unique('meanwhile'), asked.sessionId)).reply, /^You said: meanwhile/);
});

// Every question type of §8, with answers that fit and answers that do not (and what the reason names).
const judging: Array<[type: string, fits: string[], misfits: Array<[answer: string, reason: RegExp]>]> = [
  ['text', ['anything at all', ' padded '], [['   ', /empty|missing/i]]],
  ['number', ['42', '-3.5', '1e3', '.5'], [['forty-two', /number is missing/i], ['12 apples', /number/i], ['', /missing/i]]],
  ['date', ['2026-12-31', '2024-02-29'], [['31/12/2026', /date is missing.*YYYY-MM-DD/i], ['2026-02-30', /date/i], ['2025-02-29', /date/i]]],
  // The same rule as a sign-up's: an address the service would not take from a person is no answer either.
  ['email', ['name@example.com', 'First.Last+tag@Example.co.uk'], [['name at example.com', /email address is missing/i], ['a@b', /email/i], ['a@b.c', /email/i]]],
  ['yesno', ['yes', 'No', 'y', 'N'], [['maybe', /yes or no is missing/i], ['yes please', /yes or no/i]]],
  ['choice:red|green|blue', ['green', 'BLUE'], [['purple', /choice is missing.*red, green, blue/i], ['red|green', /choice/i]]],
];

for (const [type, fits, misfits] of judging) {
  test(`answers to a ${type} question: misfits are refused with a reason and add no turn; a fit is accepted and noted once`, async () => {
    const owner = await t.userWithAgent();
    const asked = await askQuestion(t, owner, type, unique(`A ${type} question?`));
    for (const [answer, reason] of misfits) {
      const result = await answerOne(t, owner, asked.requestId, answer);
      assert.equal(result.ok, true, answer);
      assert.equal(result.accepted, false, answer);
      assert.match(result.reason, reason, `${answer}: ${result.reason}`);
      assert.deepEqual(Object.keys(result).sort(), ['accepted', 'ok', 'reason', 'request_id']);
    }
    // Refusals leave the question open and the transcript untouched.
    assert.equal((await listQuestions(t, owner)).json().questions.length, 1);
    assert.equal(agentTexts((await transcript(t, owner, asked.sessionId)).messages).length, 1);

    const [first, ...later] = fits;
    const accepted = await answerOne(t, owner, asked.requestId, first!);
    assert.deepEqual(accepted, { request_id: asked.requestId, ok: true, accepted: true });
    for (const answer of later) {
      const again = await answerOne(t, owner, asked.requestId, answer);
      assert.equal(again.error.code, 'already_answered');
    }
    const messages = await settledTranscript(t, owner, asked.sessionId, 2);
    assert.deepEqual(agentTexts(messages).slice(1), [`Noted: ${first!.trim()}`]);
    assert.deepEqual(await questionRow(asked.requestId), { question: 'answered', answer: first, mission: 'done' });
    assert.deepEqual((await listQuestions(t, owner)).json(), { questions: [], has_more: false });
  });
}

test('every other fitting answer of each type is accepted too (checked on fresh questions)', async () => {
  const owner = await t.userWithAgent();
  for (const [type, fits] of judging) {
    for (const answer of fits.slice(1)) {
      const asked = await askQuestion(t, owner, type, unique(`Again ${type}?`));
      const result = await answerOne(t, owner, asked.requestId, answer);
      assert.equal(result.accepted, true, `${type}: ${answer} → ${JSON.stringify(result)}`);
    }
  }
});

test('!ask-user puts the question to a workspace member: both the member and the owner see it, asked_of names the member', async () => {
  const owner = await t.userWithAgent();
  const member = await memberOfOwnersWorkspace(t, owner);
  const asked = await askQuestion(t, owner, 'yesno', unique('Can you sign it?'), { of: member.email });
  assert.match(asked.reply, new RegExp(member.email.replace(/[.]/g, '\\.')));

  for (const viewer of [owner, member]) {
    const { questions } = (await listQuestions(t, viewer)).json();
    assert.deepEqual(questions.map((q: { request_id: string; asked_of: string }) => [q.request_id, q.asked_of]), [[asked.requestId, member.id]]);
  }
  // The member answers; the owner's transcript shows the continuation.
  assert.deepEqual(await answerOne(t, member, asked.requestId, 'yes'), { request_id: asked.requestId, ok: true, accepted: true });
  const messages = await settledTranscript(t, owner, asked.sessionId, 2);
  assert.deepEqual(agentTexts(messages).slice(1), ['Noted: yes']);
  assert.deepEqual((await listQuestions(t, member)).json(), { questions: [], has_more: false });
});

test('the mission\'s owner may answer a question put to someone else; the first accepted answer wins', async () => {
  const owner = await t.userWithAgent();
  const member = await memberOfOwnersWorkspace(t, owner);
  const asked = await askQuestion(t, owner, 'number', unique('How many seats?'), { of: member.email });
  // The member's misfit does not settle it; the owner's fit does; the member's later fit is too late.
  assert.equal((await answerOne(t, member, asked.requestId, 'a few')).accepted, false);
  assert.equal((await answerOne(t, owner, asked.requestId, '12')).accepted, true);
  const late = await answerOne(t, member, asked.requestId, '14');
  assert.equal(late.error.code, 'already_answered');
  const messages = await settledTranscript(t, owner, asked.sessionId, 2);
  assert.deepEqual(agentTexts(messages).slice(1), ['Noted: 12']);
});

test('!ask-user to someone who is not a member of the agent\'s workspace asks nothing and says so', async () => {
  const owner = await t.userWithAgent();
  const outsider = await t.user();
  for (const email of [outsider.email, 'nobody-at-all@example.test']) {
    const sent = await send(t, owner, `!ask-user ${email} text ${unique('Are you there?')}`);
    assert.match(sent.reply, /not a member/);
    assert.doesNotMatch(sent.reply, /req_/);
  }
  assert.deepEqual((await listQuestions(t, owner)).json(), { questions: [], has_more: false });
  assert.deepEqual((await listQuestions(t, outsider)).json(), { questions: [], has_more: false });
  const rows = await t.runtime.store.db.selectFrom('questions').select('id').where('owner_user_id', '=', owner.id).execute();
  assert.equal(rows.length, 0);
});

test('POST /questions/answers takes { "answers": [...] } as well as a bare array; results in order', async () => {
  const owner = await t.userWithAgent();
  const a = await askQuestion(t, owner, 'text', unique('First?'));
  const b = await askQuestion(t, owner, 'number', unique('Second?'));
  const res = await postAnswers(t, owner, { answers: [{ request_id: a.requestId, text: 'fine' }, { request_id: b.requestId, text: 'many' }] });
  assert.equal(res.statusCode, 200);
  assert.deepEqual(res.json().results.map((r: { request_id: string; accepted: boolean }) => [r.request_id, r.accepted]), [
    [a.requestId, true], [b.requestId, false],
  ]);
});

test('open questions are listed oldest first', async () => {
  const owner = await t.userWithAgent();
  const first = await askQuestion(t, owner, 'text', unique('Older?'));
  const second = await askQuestion(t, owner, 'text', unique('Newer?'));
  assert.deepEqual((await listQuestions(t, owner)).json().questions.map((q: { request_id: string }) => q.request_id), [first.requestId, second.requestId]);
});

test('questions come a page at a time (limit, has_more, after= the last request_id, answered since or not), and ?session_id= narrows them', async () => {
  const owner = await t.userWithAgent();
  const member = await memberOfOwnersWorkspace(t, owner);
  const q1 = await askQuestion(t, owner, 'text', unique('First?'));
  const q2 = await askQuestion(t, owner, 'text', unique('Second, elsewhere?'));
  const q3 = await askQuestion(t, owner, 'text', unique('Third?'), { target: q1.sessionId });
  const q4 = await askQuestion(t, owner, 'yesno', unique('Fourth, for the member?'), { of: member.email, target: q1.sessionId });
  const ids = (res: { json(): { questions: Array<{ request_id: string }> } }) => res.json().questions.map((q) => q.request_id);

  const first = await listQuestions(t, owner, '?limit=2');
  assert.deepEqual(ids(first), [q1.requestId, q2.requestId]);
  assert.equal(first.json().has_more, true);
  const second = await listQuestions(t, owner, `?limit=2&after=${q2.requestId}`);
  assert.deepEqual(ids(second), [q3.requestId, q4.requestId]);
  assert.equal(second.json().has_more, false);
  assert.deepEqual(ids(await listQuestions(t, owner, `?session_id=${q1.sessionId}`)), [q1.requestId, q3.requestId, q4.requestId]);
  // An answered question still marks a place in the list.
  assert.equal((await answerOne(t, owner, q1.requestId, 'an answer')).accepted, true);
  assert.deepEqual(ids(await listQuestions(t, owner, `?after=${q1.requestId}`)), [q2.requestId, q3.requestId, q4.requestId]);
  // The person asked pages through what was put to them; a question they were not asked is no place of theirs.
  const members = await listQuestions(t, member, `?after=${q4.requestId}`);
  assert.deepEqual(members.json(), { questions: [], has_more: false });
  assert.equal((await listQuestions(t, member, `?after=${q3.requestId}`)).statusCode, 422);
});

test('without limit and after every open question is listed, as contract §6 gives the list; a page is 50 when only after is given', async () => {
  const owner = await t.userWithAgent();
  const asked = await askQuestion(t, owner, 'text', unique('The first of 52?'));
  const { db } = t.runtime.store;
  const row = await db.selectFrom('questions').selectAll().where('id', '=', asked.requestId).executeTakeFirstOrThrow();
  // Put as a brain may put several in one mission: written straight, 51 more.
  for (let n = 2; n <= 52; n++) await db.insertInto('questions').values({ ...row, id: newId('question'), text: `Number ${n}?` }).execute();
  const whole = (await listQuestions(t, owner)).json();
  assert.equal(whole.questions.length, 52);
  assert.equal(whole.has_more, false);
  const afterFirst = (await listQuestions(t, owner, `?after=${asked.requestId}`)).json();
  assert.equal(afterFirst.questions.length, 50);
  assert.equal(afterFirst.has_more, true);
});
