import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { agentTexts, answerOne, askQuestion, listQuestions, postAnswers, settledTranscript, transcript, unique } from '../../../testing/missions.ts';
import { API, startTestApp, type TestApp } from '../../../testing/harness.ts';

let t: TestApp;
before(async () => { t = await startTestApp(); });
after(async () => { await t.close(); });

const invalidBodies: Array<[string, unknown]> = [
  ['an empty array', []],
  ['101 entries', Array.from({ length: 101 }, () => ({ request_id: 'req_x', text: 'x' }))],
  ['an object without answers', { request_id: 'req_x', text: 'x' }],
  ['answers that is not an array', { answers: { request_id: 'req_x', text: 'x' } }],
  ['an empty answers array', { answers: [] }],
  ['a string', 'yes'],
  ['null', null],
];

for (const [what, body] of invalidBodies) {
  test(`422 validation_failed when the body is ${what}`, async () => {
    const owner = await t.userWithAgent();
    const res = await postAnswers(t, owner, body);
    assert.equal(res.statusCode, 422, res.body);
    const problem = res.json();
    assert.equal(problem.code, 'validation_failed');
    assert.ok(Array.isArray(problem.errors) && problem.errors.length > 0);
    for (const e of problem.errors) assert.deepEqual(Object.keys(e).sort(), ['message', 'path']);
  });
}

test('400 malformed_json for a body that is not JSON', async () => {
  const owner = await t.userWithAgent();
  const res = await t.inject({ method: 'POST', url: `${API}/questions/answers`, headers: { ...owner.auth, 'content-type': 'application/json' }, payload: '[{' });
  assert.equal(res.statusCode, 400);
  assert.equal(res.json().code, 'malformed_json');
});

test('a bulk request with good and bad entries: one result per entry, in order; the bad never fail the good', async () => {
  const owner = await t.userWithAgent();
  const number = await askQuestion(t, owner, 'number', unique('How many?'));
  const date = await askQuestion(t, owner, 'date', unique('When?'), { target: number.sessionId });
  const res = await postAnswers(t, owner, [
    { request_id: 'req_doesnotexist0000000000', text: 'x' },
    { request_id: number.requestId, text: 'lots' },
    { request_id: number.requestId, text: 7 },
    { request_id: number.requestId },
    'not an object',
    { text: '7' },
    { request_id: number.requestId, text: '7' },
    { request_id: number.requestId, text: '8' },
    { request_id: date.requestId, text: 'x'.repeat(32_001) },
    { request_id: date.requestId, text: '2026-01-02' },
  ]);
  assert.equal(res.statusCode, 200);
  const results = res.json().results;
  assert.equal(results.length, 10);
  const summary = results.map((r: { ok: boolean; accepted?: boolean; error?: { code: string } }) => (r.ok ? (r.accepted ? 'accepted' : 'refused') : r.error!.code));
  assert.deepEqual(summary, [
    'not_found', 'refused', 'refused', 'refused', 'not_found', 'not_found', 'accepted', 'already_answered', 'refused', 'accepted',
  ]);
  assert.deepEqual(results.map((r: { request_id: unknown }) => r.request_id), [
    'req_doesnotexist0000000000', number.requestId, number.requestId, number.requestId, null, null,
    number.requestId, number.requestId, date.requestId, date.requestId,
  ]);
  assert.match(results[2].reason, /missing/);
  // An entry that names no question says why, not "No open question with this request_id".
  assert.match(results[4].error.message, /not an object/);
  assert.match(results[5].error.message, /no request_id/);
  assert.match(results[8].reason, /longer than/);
  // Two accepted answers, two continuation turns, nothing for the refusals.
  const messages = await settledTranscript(t, owner, number.sessionId, 4);
  assert.deepEqual(agentTexts(messages).slice(2).sort(), ['Noted: 2026-01-02', 'Noted: 7']);
});

test('not_found for ids that are not question ids at all', async () => {
  const owner = await t.userWithAgent();
  for (const id of ['', 'op_abc', "req_' or 1=1 --", 'req_' + 'b'.repeat(100)]) {
    const result = await answerOne(t, owner, id, 'x');
    assert.equal(result.error.code, 'not_found', id);
  }
});

test('a refused answer adds no turn and keeps the session idle', async () => {
  const owner = await t.userWithAgent();
  const asked = await askQuestion(t, owner, 'email', unique('Where to?'));
  assert.equal((await answerOne(t, owner, asked.requestId, 'nowhere')).accepted, false);
  const now = await transcript(t, owner, asked.sessionId);
  assert.equal(now.status, 'idle');
  assert.equal(now.messages.length, 2);
  assert.equal((await listQuestions(t, owner)).json().questions.length, 1);
});

test('a NUL character (U+0000) in one answer fails that entry alone; the others are judged', async () => {
  const owner = await t.userWithAgent();
  const first = await askQuestion(t, owner, 'text', unique('First, with a NUL?'));
  const second = await askQuestion(t, owner, 'text', unique('Second, fine?'), { target: first.sessionId });
  const res = await postAnswers(t, owner, [
    { request_id: 'req_abc\u0000def', text: 'x' },
    { request_id: first.requestId, text: 'half\u0000an answer' },
    { request_id: first.requestId, text: 'a lone \ud800 surrogate' },
    { request_id: second.requestId, text: 'a fine answer' },
  ]);
  assert.equal(res.statusCode, 200, res.body);
  const [badId, badText, loneSurrogate, good] = res.json().results;
  assert.equal(badId.ok, false);
  assert.equal(badId.error.code, 'not_found');
  assert.equal(badId.request_id, 'req_abc\u0000def', 'echoed as sent');
  assert.match(badId.error.message, /NUL character/);
  assert.deepEqual(Object.keys(badText).sort(), ['accepted', 'ok', 'reason', 'request_id']);
  assert.equal(badText.accepted, false);
  assert.match(badText.reason, /NUL character \(U\+0000\) and lone UTF-16 surrogates are not allowed/);
  // Stored, it would come back as U+FFFD: "Noted: a lone � surrogate" would not be what was sent.
  assert.equal(loneSurrogate.accepted, false);
  assert.match(loneSurrogate.reason, /lone UTF-16 surrogates are not allowed/);
  assert.deepEqual(good, { request_id: second.requestId, ok: true, accepted: true });
  // The refused one stays open and adds no turn; the accepted one continues once.
  assert.deepEqual((await listQuestions(t, owner)).json().questions.map((q: { request_id: string }) => q.request_id), [first.requestId]);
  const messages = await settledTranscript(t, owner, first.sessionId, 3);
  assert.deepEqual(agentTexts(messages).slice(2), ['Noted: a fine answer']);
});

test('the answer length limit counts code points, as for messages: 32,000 emoji fit, 32,001 are refused', async () => {
  const owner = await t.userWithAgent();
  const asked = await askQuestion(t, owner, 'text', unique('Long answer?'));
  const tooLong = await answerOne(t, owner, asked.requestId, '😀'.repeat(32_001));
  assert.equal(tooLong.accepted, false);
  assert.match(tooLong.reason, /longer than 32000 characters/);
  const longest = '😀'.repeat(32_000); // 64,000 UTF-16 code units
  assert.deepEqual(await answerOne(t, owner, asked.requestId, longest), { request_id: asked.requestId, ok: true, accepted: true });
  const messages = await settledTranscript(t, owner, asked.sessionId, 2);
  assert.equal(agentTexts(messages)[1], `Noted: ${longest}`);
});

test('GET /questions: a limit that is not an integer from 1 to 200 is a 422 on limit, and after= naming no question of the caller\'s a 422 on after', async () => {
  const owner = await t.userWithAgent();
  const stranger = await t.userWithAgent();
  const theirs = await askQuestion(t, stranger, 'text', unique('Not yours?'));
  await askQuestion(t, owner, 'text', unique('Yours?'));
  for (const limit of ['0', '201', '1e2', 'x']) {
    const res = await listQuestions(t, owner, `?limit=${limit}`);
    assert.equal(res.statusCode, 422, `limit=${limit}: ${res.body}`);
    assert.deepEqual(res.json().errors.map((e: { path: string }) => e.path), ['limit']);
  }
  const bodies = [];
  for (const after of [theirs.requestId, 'req_0VboFtAFsgk9ihiaLL9jttD7OTSj3X', 'op_abc', '']) {
    const res = await listQuestions(t, owner, `?after=${after}`);
    assert.equal(res.statusCode, 422, `after=${after}: ${res.body}`);
    const { request_id: _, ...body } = res.json();
    bodies.push(body);
  }
  assert.deepEqual(bodies[0].errors, [{ path: 'after', message: 'must be the request_id of a question listed to you on an earlier page' }]);
  for (const body of bodies.slice(1)) assert.deepEqual(body, bodies[0]);
  assert.equal((await listQuestions(t, owner)).json().questions.length, 1);
});
