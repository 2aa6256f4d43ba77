import assert from 'node:assert/strict';
import { test } from 'node:test';
import { answerOne, decideOne, listActions, listQuestions, send, sendNoWait, settledTranscript, unique } from '../testing/missions.ts';
import { continuationOutcome, isJudge, startFakeModelProvider, withModelApp, type FakeModelProvider } from '../testing/fake-model-provider.ts';
import { API, startTestApp, type TestApp, type TestUser } from '../testing/harness.ts';
import { modelFailedText } from './llm.ts';
import { ToolRegistry } from './tools.ts';

/** A model call that fails (HTTP error, timeout, malformed or unusable answer): 502 agent_failed, an error turn, one warning. */
const KEY = 'sk-test-error-key-0123456789';
const PROVIDER_TEXT = 'upstream exploded: internal trace 0xDEADBEEF';
let provider: FakeModelProvider;
let t: TestApp;
const warnings: Array<{ fields: Record<string, unknown>; message: string }> = [];

withModelApp({ provider: 'openai-compatible', name: 'test-model', apiKey: KEY, timeoutMs: 1_000, systemPrompt: null }, (started) => ({ provider, t } = started),
  { logWarning: (fields, message) => warnings.push({ fields, message }) });

async function failsWith502(u: TestUser, text: string, failedText: string) {
  const res = await t.inject({ method: 'POST', url: `${API}/messages`, headers: u.auth, payload: { text } });
  assert.equal(res.statusCode, 502, res.body);
  const problem = res.json();
  assert.equal(problem.code, 'agent_failed');
  const messages = await settledTranscript(t, u, problem.session_id, 1);
  assert.deepEqual({ ...messages.at(-1)!, ts: undefined }, { role: 'agent', text: failedText, error: 'agent_failed', ts: undefined });
  for (const leak of [KEY, PROVIDER_TEXT]) assert.ok(!res.body.includes(leak) && !JSON.stringify(messages).includes(leak), leak);
  return problem;
}

const ITS_MODEL = 'The agent could not process this message: its model';
for (const [what, reply, failure, statusCode, failedText] of [
  ['an HTTP 500 from the provider', { status: 500, message: PROVIDER_TEXT }, 'http_error', 500, `${ITS_MODEL} refused the request (HTTP 500).`],
  ['an HTTP 401 (a wrong key)', { status: 401, message: `${PROVIDER_TEXT}: bad key ${KEY}` }, 'http_error', 401, `${ITS_MODEL} refused the request (HTTP 401).`],
  ['a body that is not JSON', { rawBody: `<html>${PROVIDER_TEXT}</html>` }, 'no_usable_answer', 200, `${ITS_MODEL} gave no usable answer.`],
  ['JSON that is not a chat completion', { rawBody: JSON.stringify({ choices: 'none', note: PROVIDER_TEXT }) }, 'no_usable_answer', 200, `${ITS_MODEL} gave no usable answer.`],
  ['an answer with neither text nor a tool call', { text: '' }, 'no_usable_answer', 200, `${ITS_MODEL} gave no usable answer.`],
  ['no answer within MODEL_TIMEOUT_MS', { hang: true }, 'timeout', null, `${ITS_MODEL} did not answer in time.`],
] as const) {
  test(`${what}: 502 agent_failed, an error turn naming the kind of failure as the warning does, one warning with the status and the job's ids, nothing secret`, async () => {
    provider.script = () => reply;
    warnings.length = 0;
    const u = await t.userWithAgent();
    const problem = await failsWith502(u, unique('Hello'), failedText);
    assert.equal(warnings.length, 1, JSON.stringify(warnings));
    const [{ fields, message }] = warnings as [typeof warnings[0]];
    assert.equal(message, 'the model call failed');
    assert.equal(fields.failure, failure);
    assert.equal(fields.statusCode, statusCode);
    assert.equal(fields.sessionId, problem.session_id);
    assert.equal(fields.agentId, u.agentId);
    assert.equal(typeof fields.jobId, 'number');
    for (const leak of [KEY, PROVIDER_TEXT]) assert.ok(!JSON.stringify(warnings).includes(leak), leak);
  });
}

test('a shutdown aborts a model call under way (the provider sees it given up) without calling it a failure, and the turn runs again at the next start', { timeout: 60_000 }, async () => {
  let hang = true;
  const own = await startFakeModelProvider(() => (hang ? { hang: true } : { text: 'Answered after the restart.' }));
  const ownWarnings: unknown[] = [];
  let app = await startTestApp(
    { model: { provider: 'openai-compatible', name: 'm', baseUrl: own.baseUrl, apiKey: KEY, timeoutMs: 600_000, systemPrompt: null } },
    { logWarning: (fields) => ownWarnings.push(fields) },
  );
  try {
    const u = await app.userWithAgent();
    const accepted = await sendNoWait(app, u, unique('Before the shutdown'));
    while (own.requests.length === 0) await new Promise((resolve) => setTimeout(resolve, 10));
    hang = false;
    app = await app.restart(); // a grace of 0: the running turn is aborted at once
    const deadline = Date.now() + 10_000; // bounded: without the abort the call would wait for its 10 min timeout
    while (!own.requests[0]!.abandoned && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 10));
    assert.equal(own.requests[0]!.abandoned, true);
    const messages = await settledTranscript(app, u, accepted.session_id, 1);
    assert.deepEqual(messages.filter((m) => m.role === 'agent').map((m) => [m.text, m.error]), [['Answered after the restart.', undefined]]);
    assert.deepEqual(ownWarnings, [], 'a shutdown is no failed model call');
  } finally {
    await app.close();
    await own.close();
  }
});

test('a shutdown while the model words the reply to an approved action that ran: the action is done ("Done: <summary>") and its tool does not run again at the next start', { timeout: 60_000 }, async () => {
  let hang = true;
  const own = await startFakeModelProvider((request) => continuationOutcome(request) === 'approved'
    ? (hang ? { hang: true } : { text: 'Sent after the restart.' })
    : { toolCalls: [{ name: 'request_action', input: { kind: 'email', summary: 'Email Di' } }] });
  const ran: string[] = [];
  const tools = new ToolRegistry().register({ kind: 'email', needsPermission: true, description: 'Sends an email', run: async (action) => { ran.push(action.operationId); } });
  let app = await startTestApp({ model: { provider: 'openai-compatible', name: 'm', baseUrl: own.baseUrl, apiKey: KEY, timeoutMs: 600_000, systemPrompt: null } }, { tools });
  try {
    const u = await app.userWithAgent();
    const sent = await send(app, u, unique('Write to Di'));
    const [action] = (await listActions(app, u)).json().actions;
    await decideOne(app, u, { operation_id: action.operation_id, decision: 'approve' });
    while (!own.requests.some((request) => continuationOutcome(request) === 'approved')) await new Promise((resolve) => setTimeout(resolve, 10));
    assert.deepEqual(ran, [action.operation_id]);
    hang = false;
    app = await app.restart(); // a grace of 0: the running turn is aborted at once
    const messages = await settledTranscript(app, u, sent.sessionId, 2);
    assert.deepEqual(messages.filter((m) => m.role === 'agent').map((m) => [m.text, m.error]).at(-1), ['Done: Email Di', undefined]);
    assert.deepEqual(ran, [action.operation_id], 'the tool ran once');
    const row = await app.runtime.store.db.selectFrom('actions').select('status').where('id', '=', action.operation_id).executeTakeFirstOrThrow();
    assert.equal(row.status, 'done');
  } finally {
    await app.close();
    await own.close();
  }
});

test('a shutdown while a text answer is judged: the judge call is given up at once (the server need not wait for the model to stop), the answer refused as not judged, no failure logged', { timeout: 60_000 }, async () => {
  const own = await startFakeModelProvider((request) => isJudge(request)
    ? { hang: true } : { toolCalls: [{ name: 'ask_user', input: { question: 'Why?', answer_type: 'text' } }] });
  const ownWarnings: unknown[] = [];
  const app = await startTestApp(
    { model: { provider: 'openai-compatible', name: 'm', baseUrl: own.baseUrl, apiKey: KEY, timeoutMs: 600_000, systemPrompt: null } },
    { logWarning: (fields) => ownWarnings.push(fields) },
  );
  try {
    const u = await app.userWithAgent();
    await send(app, u, unique('Ask me why'));
    const [question] = (await listQuestions(app, u)).json().questions;
    const answered = answerOne(app, u, question.request_id, 'Because.');
    while (!own.requests.some(isJudge)) await new Promise((resolve) => setTimeout(resolve, 10));
    await app.runtime.engine.stop(0);
    // Bounded: without the abort the judge would wait for its 10 min timeout.
    const refused = await Promise.race([answered, new Promise((resolve) => setTimeout(() => resolve('still judging'), 10_000))]) as any;
    assert.equal(refused.accepted, false, JSON.stringify(refused));
    assert.match(refused.reason, /could not be judged just now/);
    const deadline = Date.now() + 5_000; // the provider hears of it a moment later
    while (!own.requests.find(isJudge)!.abandoned && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 10));
    assert.equal(own.requests.find(isJudge)!.abandoned, true);
    assert.deepEqual(ownWarnings, [], 'a shutdown is no failed model call');
  } finally {
    await app.close();
    await own.close();
  }
});

test('a provider nobody answers at (connection refused): 502 agent_failed and a network_error warning', async () => {
  const gone = await startFakeModelProvider();
  await gone.close(); // its port now refuses connections
  const ownWarnings: Array<Record<string, unknown>> = [];
  const app = await startTestApp(
    { model: { provider: 'openai-compatible', name: 'm', baseUrl: gone.baseUrl, apiKey: KEY, timeoutMs: 10_000, systemPrompt: null } },
    { logWarning: (fields) => ownWarnings.push(fields) },
  );
  try {
    const u = await app.userWithAgent();
    const res = await app.inject({ method: 'POST', url: `${API}/messages`, headers: u.auth, payload: { text: unique('Anyone there?') } });
    assert.equal(res.statusCode, 502, res.body);
    assert.equal(res.json().code, 'agent_failed');
    assert.deepEqual(ownWarnings.map((w) => [w.failure, w.statusCode]), [['network_error', null]]);
    const messages = await settledTranscript(app, u, res.json().session_id, 1);
    assert.equal(messages.at(-1)!.text, 'The agent could not process this message: its model could not be reached.');
  } finally {
    await app.close();
  }
});

test('anthropic: an overloaded provider (529, Anthropic\'s error body) is 502 agent_failed too, with the status in the warning', async () => {
  const own = await startFakeModelProvider(() => ({ status: 529, message: PROVIDER_TEXT }));
  const ownWarnings: Array<Record<string, unknown>> = [];
  const app = await startTestApp(
    { model: { provider: 'anthropic', name: 'claude-test', baseUrl: own.baseUrl, apiKey: KEY, timeoutMs: 10_000, systemPrompt: null } },
    { logWarning: (fields) => ownWarnings.push(fields) },
  );
  try {
    const u = await app.userWithAgent();
    const res = await app.inject({ method: 'POST', url: `${API}/messages`, headers: u.auth, payload: { text: unique('Busy?') } });
    assert.equal(res.statusCode, 502, res.body);
    assert.ok(!res.body.includes(PROVIDER_TEXT) && !res.body.includes(KEY));
    assert.equal(own.requests[0]!.protocol, 'anthropic');
    const failures = ownWarnings.filter((w) => w.failure);
    assert.deepEqual(failures.map((w) => [w.failure, w.statusCode]), [['http_error', 529]]);
    assert.ok(!JSON.stringify(ownWarnings).includes(PROVIDER_TEXT));
  } finally {
    await app.close();
    await own.close();
  }
});

test('past the wait ceiling (Prefer: wait=0) the failure is an error turn in the transcript', async () => {
  provider.script = () => ({ status: 503, message: PROVIDER_TEXT });
  const u = await t.userWithAgent();
  const accepted = await sendNoWait(t, u, unique('Later'));
  const messages = await settledTranscript(t, u, accepted.session_id, 1);
  assert.equal(messages.at(-1)!.error, 'agent_failed');
  assert.equal(messages.at(-1)!.text, modelFailedText('http_error', 503));
  assert.equal(messages.at(-1)!.text, 'The agent could not process this message: its model refused the request (HTTP 503).');
});

test('a model that fails after an approved action ran does not fail the action: the reply is "Done: <summary>"', async () => {
  provider.script = (request) => continuationOutcome(request) === 'approved'
    ? { status: 500, message: PROVIDER_TEXT }
    : { toolCalls: [{ name: 'request_action', input: { kind: 'email', summary: 'Email Cy' } }] };
  const u = await t.userWithAgent();
  const sent = await send(t, u, unique('Write to Cy'));
  const [action] = (await listActions(t, u)).json().actions;
  await decideOne(t, u, { operation_id: action.operation_id, decision: 'approve' });
  const messages = await settledTranscript(t, u, sent.sessionId, 2);
  assert.deepEqual([messages.at(-1)!.text, messages.at(-1)!.error], ['Done: Email Cy', undefined]);
  const row = await t.runtime.store.db.selectFrom('actions').select('status').where('id', '=', action.operation_id).executeTakeFirstOrThrow();
  assert.equal(row.status, 'done');
});

test('a judge that fails refuses the text answer, saying it could not be judged; the question stays open for another try', async () => {
  let judgeWorks = false;
  provider.script = (request) => {
    if (isJudge(request)) return judgeWorks ? { toolCalls: [{ name: 'judge_answer', input: { accepted: true } }] } : { status: 500, message: PROVIDER_TEXT };
    if (continuationOutcome(request) === 'answered') return { text: 'Got it.' };
    return { toolCalls: [{ name: 'ask_user', input: { question: 'Why?', answer_type: 'text' } }] };
  };
  const u = await t.userWithAgent();
  await send(t, u, unique('Decide for me'));
  const [question] = (await listQuestions(t, u)).json().questions;
  const refused = await answerOne(t, u, question.request_id, 'Because.');
  assert.equal(refused.accepted, false);
  assert.match(refused.reason, /could not be judged just now/);
  assert.ok(!JSON.stringify(refused).includes(PROVIDER_TEXT));
  assert.deepEqual([warnings.at(-1)!.fields.requestId, warnings.at(-1)!.fields.statusCode], [question.request_id, 500]);
  judgeWorks = true;
  assert.equal((await answerOne(t, u, question.request_id, 'Because.')).accepted, true);
});

for (const [what, judge] of [
  ['without calling judge_answer', { text: 'Looks fine to me.' }],
  ['with a judge_answer call that gives no verdict', { toolCalls: [{ name: 'judge_answer', input: { reason: 'Seems fine' } }] }],
] as const) {
  test(`a judge that answers ${what} is a failure too, not an acceptance`, async () => {
    provider.script = (request) => isJudge(request) ? judge : { toolCalls: [{ name: 'ask_user', input: { question: 'Why not?' } }] };
    const u = await t.userWithAgent();
    await send(t, u, unique('Decide again'));
    const [question] = (await listQuestions(t, u)).json().questions;
    assert.equal(question.answer_type, 'text');
    const refused = await answerOne(t, u, question.request_id, 'Because.');
    assert.equal(refused.accepted, false);
    assert.match(refused.reason, /could not be judged just now/);
  });
}
