import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { decideOne, draftAction, listActions, postDecisions, settledTranscript, agentTexts, unique } from '../../../testing/missions.ts';
import { API, startTestApp, type TestApp } from '../../../testing/harness.ts';

let t: TestApp;
before(async () => { t = await startTestApp(); });
after(async () => { await t.close(); });

const invalidBodies: Array<[string, unknown]> = [
  ['an empty array', []],
  ['101 entries', Array.from({ length: 101 }, () => ({ operation_id: 'op_x', decision: 'approve' }))],
  ['an object without decisions', { operation_id: 'op_x', decision: 'approve' }],
  ['decisions that is not an array', { decisions: 'approve everything' }],
  ['an empty decisions array', { decisions: [] }],
  ['a string', 'approve'],
  ['a number', 42],
  ['null', null],
];

for (const [what, body] of invalidBodies) {
  test(`422 validation_failed when the body is ${what}`, async () => {
    const owner = await t.userWithAgent();
    const res = await postDecisions(t, owner, body);
    assert.equal(res.statusCode, 422, res.body);
    assert.equal(res.headers['content-type'], 'application/problem+json; charset=utf-8');
    const problem = res.json();
    assert.equal(problem.code, 'validation_failed');
    assert.ok(Array.isArray(problem.errors) && problem.errors.length > 0);
    for (const e of problem.errors) {
      assert.equal(typeof e.path, 'string');
      assert.equal(typeof e.message, 'string');
    }
  });
}

test('a 422 body settles nothing', async () => {
  const owner = await t.userWithAgent();
  const drafted = await draftAction(t, owner, 'email', unique('kept'));
  const entries = Array.from({ length: 101 }, () => ({ operation_id: drafted.operationId, decision: 'approve' }));
  assert.equal((await postDecisions(t, owner, entries)).statusCode, 422);
  assert.deepEqual((await listActions(t, owner)).json().actions.map((a: { operation_id: string }) => a.operation_id), [drafted.operationId]);
});

test('100 entries are accepted (the upper bound)', async () => {
  const owner = await t.userWithAgent();
  const entries = Array.from({ length: 100 }, (_, i) => ({ operation_id: `op_missing${i}`, decision: 'approve' }));
  const res = await postDecisions(t, owner, entries);
  assert.equal(res.statusCode, 200);
  assert.equal(res.json().results.length, 100);
  assert.ok(res.json().results.every((r: { error: { code: string } }) => r.error.code === 'not_found'));
});

test('400 malformed_json for a body that is not JSON; 415 for a body that is not application/json', async () => {
  const owner = await t.userWithAgent();
  const broken = await t.inject({ method: 'POST', url: `${API}/actions/decisions`, headers: { ...owner.auth, 'content-type': 'application/json' }, payload: '[{"operation_id": ' });
  assert.equal(broken.statusCode, 400);
  assert.equal(broken.json().code, 'malformed_json');
  const text = await t.inject({ method: 'POST', url: `${API}/actions/decisions`, headers: { ...owner.auth, 'content-type': 'text/plain' }, payload: 'approve' });
  assert.equal(text.statusCode, 415);
  assert.equal(text.json().code, 'unsupported_media_type');
});

test('a bulk request with good and bad entries: one result per entry, in order; the bad never fail the good', async () => {
  const owner = await t.userWithAgent();
  const first = await draftAction(t, owner, 'email', unique('first'));
  const second = await draftAction(t, owner, 'email', unique('second'), first.sessionId);
  const settled = await draftAction(t, owner, 'email', unique('settled'), first.sessionId);
  assert.equal((await decideOne(t, owner, { operation_id: settled.operationId, decision: 'reject', reason: 'earlier' })).ok, true);

  const res = await postDecisions(t, owner, [
    { operation_id: 'op_doesnotexist0000000000', decision: 'approve' },
    { operation_id: first.operationId, decision: 'approve' },
    { operation_id: first.operationId, decision: 'maybe' },
    'not an object',
    { decision: 'approve' },
    { operation_id: settled.operationId, decision: 'approve' },
    { operation_id: second.operationId, decision: 'reject', reason: 42 },
    { operation_id: second.operationId, decision: 'reject', reason: 'x'.repeat(2001) },
    { operation_id: first.operationId, decision: 'reject' },
    { operation_id: second.operationId, decision: 'reject', reason: 'later' },
  ]);
  assert.equal(res.statusCode, 200);
  const results = res.json().results;
  assert.equal(results.length, 10);
  const codes = results.map((r: { ok: boolean; outcome?: string; error?: { code: string } }) => (r.ok ? r.outcome : r.error!.code));
  assert.deepEqual(codes, [
    'not_found', 'approved', 'invalid_decision', 'invalid_decision', 'invalid_decision',
    'already_settled', 'invalid_decision', 'invalid_decision', 'already_settled', 'rejected',
  ]);
  assert.deepEqual(results.map((r: { operation_id: unknown }) => r.operation_id), [
    'op_doesnotexist0000000000', first.operationId, first.operationId, null, null,
    settled.operationId, second.operationId, second.operationId, first.operationId, second.operationId,
  ]);
  for (const r of results.filter((x: { ok: boolean }) => !x.ok)) {
    assert.equal(typeof r.error.message, 'string');
    assert.ok(r.error.message.length > 0);
  }
  assert.match(results[2].error.message, /decision/);
  assert.match(results[6].error.message, /reason/);

  // Exactly the two good decisions (plus the earlier rejection) became continuation turns.
  const messages = await settledTranscript(t, owner, first.sessionId, 6);
  assert.equal(agentTexts(messages).length, 6);
  assert.deepEqual(agentTexts(messages).slice(3).sort(), ['Done: ' + /"email": (.*) \(operation_id/.exec(first.reply)![1], 'Re-planned: earlier', 'Re-planned: later'].sort());
});

test('already_settled for an action decided before, whatever the second decision is', async () => {
  const owner = await t.userWithAgent();
  const drafted = await draftAction(t, owner, 'email', unique('twice'));
  assert.equal((await decideOne(t, owner, { operation_id: drafted.operationId, decision: 'approve' })).ok, true);
  for (const decision of ['approve', 'approve_same_type', 'reject']) {
    const again = await decideOne(t, owner, { operation_id: drafted.operationId, decision });
    assert.deepEqual(again, {
      operation_id: drafted.operationId, ok: false,
      error: { code: 'already_settled', message: again.error.message },
    });
  }
  // Still one continuation.
  const messages = await settledTranscript(t, owner, drafted.sessionId, 2);
  assert.equal(agentTexts(messages).length, 2);
});

test('not_found for ids that are not action ids at all', async () => {
  const owner = await t.userWithAgent();
  for (const id of ['', 'req_abc', "op_' or 1=1 --", 'op_' + 'a'.repeat(100)]) {
    const result = await decideOne(t, owner, { operation_id: id, decision: 'approve' });
    assert.equal(result.ok, false);
    assert.equal(result.error.code, 'not_found', id);
  }
});

test('a session_id filter too long to be an id matches nothing, like any unknown id (not a 422)', async () => {
  const owner = await t.userWithAgent();
  await draftAction(t, owner, 'email', unique('listed without a filter'));
  for (const sessionId of [`ses_${'a'.repeat(100)}`, `ses_${'a'.repeat(8000)}`, 'bogus']) {
    const res = await listActions(t, owner, `?session_id=${sessionId}`);
    assert.equal(res.statusCode, 200, res.body);
    assert.deepEqual(res.json(), { actions: [], has_more: false });
  }
  assert.equal((await listActions(t, owner)).json().actions.length, 1);
});

test('a limit that is not an integer from 1 to 200 is a 422 on limit; a list changes nothing', async () => {
  const owner = await t.userWithAgent();
  await draftAction(t, owner, 'email', unique('listed around bad limits'));
  for (const limit of ['0', '201', '-1', '1e2', 'abc', '1.5', '', '%205', '99999']) {
    const res = await listActions(t, owner, `?limit=${limit}`);
    assert.equal(res.statusCode, 422, `limit=${limit}: ${res.body}`);
    assert.equal(res.json().code, 'validation_failed');
    assert.deepEqual(res.json().errors.map((e: { path: string }) => e.path), ['limit'], limit);
  }
  assert.equal((await listActions(t, owner)).json().actions.length, 1);
});

test('after= that names no action of the caller\'s is a 422 on after, the same whether it is missing, malformed or someone else\'s', async () => {
  const owner = await t.userWithAgent();
  const stranger = await t.userWithAgent();
  const theirs = await draftAction(t, stranger, 'email', unique('the stranger\'s'));
  await draftAction(t, owner, 'email', unique('the owner\'s'));
  const bodies = [];
  for (const after of [theirs.operationId, 'op_0VboFtAFBFGWZQD0TrNfT45Uwgwj7W', 'bogus', `op_${'a'.repeat(100)}`, '']) {
    const res = await listActions(t, owner, `?after=${after}`);
    assert.equal(res.statusCode, 422, `after=${after}: ${res.body}`);
    const { request_id: _, ...body } = res.json();
    bodies.push(body);
  }
  assert.deepEqual(bodies[0].errors, [{ path: 'after', message: 'must be the operation_id of an action listed to you on an earlier page' }]);
  for (const body of bodies.slice(1)) assert.deepEqual(body, bodies[0]);
});

test('a NUL character (U+0000) in one decision fails that entry alone as invalid_decision; the others are settled', async () => {
  const owner = await t.userWithAgent();
  const good = await draftAction(t, owner, 'email', unique('settled beside a NUL'));
  const withNulReason = await draftAction(t, owner, 'email', unique('NUL in the reason'), good.sessionId);
  const res = await postDecisions(t, owner, [
    { operation_id: 'op_abc\u0000def', decision: 'approve' },
    { operation_id: good.operationId, decision: 'reject', reason: 'not like this' },
    { operation_id: withNulReason.operationId, decision: 'reject', reason: 'bad\u0000reason' },
    { operation_id: withNulReason.operationId, decision: 'approve', reason: 'ignored, but still no \u0000' },
    { operation_id: withNulReason.operationId, decision: 'reject', reason: 'a lone \udc00 surrogate' },
  ]);
  assert.equal(res.statusCode, 200, res.body);
  const results = res.json().results;
  assert.deepEqual(results.map((r: { ok: boolean; outcome?: string; error?: { code: string } }) => (r.ok ? r.outcome : r.error!.code)),
    ['invalid_decision', 'rejected', 'invalid_decision', 'invalid_decision', 'invalid_decision']);
  assert.match(results[4].error.message, /^reason: .*lone UTF-16 surrogate/);
  assert.equal(results[0].operation_id, 'op_abc\u0000def', 'echoed as sent');
  assert.match(results[0].error.message, /^operation_id: .*NUL character/);
  assert.match(results[2].error.message, /^reason: .*NUL character/);
  // The entries with a NUL settled nothing: that action still waits; the good one re-planned.
  assert.deepEqual((await listActions(t, owner)).json().actions.map((a: { operation_id: string }) => a.operation_id), [withNulReason.operationId]);
  const messages = await settledTranscript(t, owner, good.sessionId, 3);
  assert.deepEqual(agentTexts(messages).slice(2), ['Re-planned: not like this']);
});

test('a NUL character in the query is still 422 validation_failed (only bulk bodies are judged per entry)', async () => {
  const owner = await t.userWithAgent();
  const res = await listActions(t, owner, '?session_id=ses_a%00b');
  assert.equal(res.statusCode, 422);
  assert.equal(res.json().code, 'validation_failed');
});

test('the 2000-character limit of a reason counts code points: 2000 emoji re-plan, 2001 are invalid_decision', async () => {
  const owner = await t.userWithAgent();
  const drafted = await draftAction(t, owner, 'email', unique('long reason'));
  const tooLong = await decideOne(t, owner, { operation_id: drafted.operationId, decision: 'reject', reason: '😀'.repeat(2001) });
  assert.equal(tooLong.error.code, 'invalid_decision');
  assert.match(tooLong.error.message, /^reason: .*2000 characters/);
  const longest = '😀'.repeat(2000); // 4000 UTF-16 code units
  const fits = await decideOne(t, owner, { operation_id: drafted.operationId, decision: 'reject', reason: longest });
  assert.equal(fits.outcome, 'rejected', JSON.stringify(fits));
  const messages = await settledTranscript(t, owner, drafted.sessionId, 2);
  assert.deepEqual(agentTexts(messages).slice(1), [`Re-planned: ${longest}`]);
});

test('a malformed entry\'s message says what to send, not the validator\'s account of types', async () => {
  const owner = await t.userWithAgent();
  const res = await postDecisions(t, owner, [
    'not an object',
    { decision: 'approve' },
    { operation_id: 'op_x' },
    { operation_id: 'op_x', decision: 'maybe' },
    { operation_id: 'op_x', decision: 'reject', reason: 42 },
  ]);
  assert.deepEqual(res.json().results.map((r: { error: { message: string } }) => r.error.message), [
    'must be an object, not a string',
    'operation_id: is required',
    'decision: is required: one of approve, approve_same_type, reject',
    'decision: must be one of approve, approve_same_type, reject',
    'reason: must be a string, not a number',
  ]);
});
