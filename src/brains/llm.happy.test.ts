import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  agentTexts, answerOne, decideOne, listActions, listQuestions, postAnswers, send, sendNoWait, settledTranscript, unique,
} from '../testing/missions.ts';
import {
  continuationOutcome, endingToolResult, isJudge, lastUserText, messageText, systemPrompt, toolNames, withModelApp, type FakeModelProvider,
} from '../testing/fake-model-provider.ts';
import type { TestApp } from '../testing/harness.ts';
import { ToolRegistry } from './tools.ts';
import { DEFAULT_SYSTEM_PROMPT, HISTORY_LEFT_OUT } from './llm.ts';

/** The model-backed brain against a local server speaking the providers' HTTP protocols (MODEL_PROVIDER set). */
const KEY = 'sk-test-happy-key';
const SYSTEM = 'You are the test agent. Be brief.';


describe('openai-compatible', () => {
  let provider: FakeModelProvider;
  let t: TestApp;
  withModelApp({ provider: 'openai-compatible', name: 'test-model', apiKey: KEY, timeoutMs: 10_000, systemPrompt: SYSTEM }, (started) => ({ provider, t } = started));

  test('a plain message: 200 completed with the model\'s text; the model name, the key (Bearer), the system prompt and the history reach the provider', async () => {
    provider.script = (request) => ({ text: `Model says: ${lastUserText(request)}` });
    const u = await t.userWithAgent();
    const first = unique('Hello model');
    const sent = await send(t, u, first);
    assert.equal(sent.reply, `Model says: ${first}`);
    const second = unique('And again');
    assert.equal((await send(t, u, second, sent.sessionId)).reply, `Model says: ${second}`);

    const request = provider.requests.at(-1)!;
    assert.equal(request.protocol, 'openai');
    assert.equal(request.body.model, 'test-model');
    assert.equal(request.headers.authorization, `Bearer ${KEY}`);
    assert.equal(systemPrompt(request), SYSTEM);
    assert.deepEqual(request.body.messages.filter((m: any) => m.role !== 'system').map((m: any) => [m.role, messageText(m)]),
      [['user', first], ['assistant', `Model says: ${first}`], ['user', second]]);
    assert.deepEqual(toolNames(request).sort(), ['ask_user', 'request_action']);
  });

  test('a message\'s history ends with it: a message queued behind it is not part of it', async () => {
    let release!: () => void;
    const gate = new Promise<void>((resolve) => { release = resolve; });
    const [a, b, c] = [unique('First'), unique('Second'), unique('Third')];
    provider.script = async (request) => {
      if (lastUserText(request) === a) await gate; // holds the agent's line while b and c are queued
      return { text: `Re: ${lastUserText(request)}` };
    };
    const u = await t.userWithAgent();
    const first = await sendNoWait(t, u, a, { agentId: u.agentId });
    await sendNoWait(t, u, b, first.session_id);
    await sendNoWait(t, u, c, first.session_id);
    release();
    assert.deepEqual(agentTexts(await settledTranscript(t, u, first.session_id, 3)), [`Re: ${a}`, `Re: ${b}`, `Re: ${c}`]);
    const ofB = provider.requests.find((request) => lastUserText(request) === b)!;
    assert.deepEqual(ofB.body.messages.filter((m: any) => m.role !== 'system').map((m: any) => messageText(m)), [a, `Re: ${a}`, b]);
  });

  test('a continuation\'s history leaves out a message queued behind it too', async () => {
    let release!: () => void;
    const gate = new Promise<void>((resolve) => { release = resolve; });
    const [ask, hold, behind] = [unique('Email the minutes'), unique('Hold the line'), unique('Queued behind the approval')];
    provider.script = async (request) => {
      const last = lastUserText(request);
      if (last === ask) return { toolCalls: [{ name: 'request_action', input: { kind: 'email', summary: 'Email the minutes' } }] };
      if (last === hold) await gate; // holds the agent's line while the approval and then `behind` are queued
      return { text: continuationOutcome(request) === 'approved' ? 'Sent.' : `Re: ${last}` };
    };
    const u = await t.userWithAgent();
    const sent = await send(t, u, ask);
    await sendNoWait(t, u, hold, sent.sessionId);
    const [action] = (await listActions(t, u)).json().actions;
    await decideOne(t, u, { operation_id: action.operation_id, decision: 'approve' });
    await sendNoWait(t, u, behind, sent.sessionId);
    release();
    assert.deepEqual(agentTexts(await settledTranscript(t, u, sent.sessionId, 4)).slice(1), [`Re: ${hold}`, 'Sent.', `Re: ${behind}`]);
    const approved = provider.requests.find((request) => continuationOutcome(request) === 'approved')!;
    // The history, then the approval as the model's own request_action call and its result.
    assert.deepEqual(approved.body.messages.filter((m: any) => m.role !== 'system').slice(0, -2).map((m: any) => messageText(m)),
      [ask, agentTexts(await settledTranscript(t, u, sent.sessionId, 4))[0], hold, `Re: ${hold}`]);
  });

  test('request_action → a pending action; approved → the model is told it is done and its reply lands in the transcript', async () => {
    const summary = unique('Email the report to Ann');
    provider.script = (request) => continuationOutcome(request) === 'approved'
      ? { text: 'The report has been sent.' }
      : { text: 'I will email it once you approve.', toolCalls: [{ name: 'request_action', input: { kind: 'email', summary, details: { to: 'ann@example.test' } } }] };
    const u = await t.userWithAgent();
    const sent = await send(t, u, unique('Send the report to Ann'));
    assert.equal(sent.reply, 'I will email it once you approve.');

    const { actions } = (await listActions(t, u)).json();
    assert.equal(actions.length, 1);
    assert.deepEqual([actions[0].kind, actions[0].summary, actions[0].details], ['email', summary, { to: 'ann@example.test' }]);
    assert.equal((await decideOne(t, u, { operation_id: actions[0].operation_id, decision: 'approve' })).ok, true);

    const messages = await settledTranscript(t, u, sent.sessionId, 2);
    assert.equal(agentTexts(messages).at(-1), 'The report has been sent.');
    assert.deepEqual(endingToolResult(provider.requests.at(-1)!), {
      toolName: 'request_action', callId: actions[0].operation_id,
      input: { kind: 'email', summary, details: { to: 'ann@example.test' } },
      output: { outcome: 'approved', carried_out: true, next: 'Tell the person it is done.' },
    });
    const row = await t.runtime.store.db.selectFrom('actions').select('status').where('id', '=', actions[0].operation_id).executeTakeFirstOrThrow();
    assert.equal(row.status, 'done');
  });

  test('with no text of its own, the reply names the operation_id; rejected with a reason, the model is told the reason and re-plans with another action', async () => {
    provider.script = (request) => continuationOutcome(request) === 'rejected'
      ? { text: 'Then I will call instead.', toolCalls: [{ name: 'request_action', input: { kind: 'call', summary: 'Call Ann' } }] }
      : { toolCalls: [{ name: 'request_action', input: { kind: 'email', summary: 'Email Ann' } }] };
    const u = await t.userWithAgent();
    const sent = await send(t, u, unique('Tell Ann'));
    const [action] = (await listActions(t, u)).json().actions;
    assert.equal(sent.reply, `I need your permission to run "email": Email Ann (operation_id ${action.operation_id}). Approve or reject it.`);

    const reason = unique('Ann prefers phone calls');
    await decideOne(t, u, { operation_id: action.operation_id, decision: 'reject', reason });
    const messages = await settledTranscript(t, u, sent.sessionId, 2);
    assert.equal(agentTexts(messages).at(-1), 'Then I will call instead.');
    const told = endingToolResult(provider.requests.at(-1)!)!;
    assert.deepEqual([told.toolName, told.callId, told.input.summary, told.output.outcome, told.output.reason],
      ['request_action', action.operation_id, 'Email Ann', 'rejected', reason]);
    const replanned = (await listActions(t, u)).json().actions;
    assert.deepEqual(replanned.map((a: any) => [a.kind, a.summary, a.mission_id]), [['call', 'Call Ann', action.mission_id]]);
  });

  test('rejected without a reason: the mission stops ("Stopped.") and the model is not asked again', async () => {
    provider.script = () => ({ text: 'Shall I?', toolCalls: [{ name: 'request_action', input: { kind: 'email', summary: 'Email Bob' } }] });
    const u = await t.userWithAgent();
    const sent = await send(t, u, unique('Tell Bob'));
    const [action] = (await listActions(t, u)).json().actions;
    const calls = provider.requests.length;
    await decideOne(t, u, { operation_id: action.operation_id, decision: 'reject' });
    assert.deepEqual(agentTexts(await settledTranscript(t, u, sent.sessionId, 2)), ['Shall I?', 'Stopped.']);
    assert.equal(provider.requests.length, calls);
    const mission = await t.runtime.store.db.selectFrom('missions').select('status').where('id', '=', action.mission_id).executeTakeFirstOrThrow();
    assert.equal(mission.status, 'stopped');
  });

  test('ask_user → an open question with its answer_type; an answer that fits is accepted and the model continues with it', async () => {
    const question = unique('How many copies?');
    provider.script = (request) => continuationOutcome(request) === 'answered'
      ? { text: `Printing ${endingToolResult(request)!.output.answer} copies.` }
      : { toolCalls: [{ name: 'ask_user', input: { question, answer_type: 'number' } }] };
    const u = await t.userWithAgent();
    const sent = await send(t, u, unique('Print the report'));
    const { questions } = (await listQuestions(t, u)).json();
    assert.deepEqual(questions.map((q: any) => [q.text, q.answer_type]), [[question, 'number']]);
    assert.match(sent.reply, new RegExp(`request_id ${questions[0].request_id}`));

    assert.deepEqual(await answerOne(t, u, questions[0].request_id, 'many'),
      { request_id: questions[0].request_id, ok: true, accepted: false, reason: 'A number is missing: answer with digits, e.g. 42 or 3.5.' });
    assert.equal((await answerOne(t, u, questions[0].request_id, '12')).accepted, true);
    assert.equal(agentTexts(await settledTranscript(t, u, sent.sessionId, 2)).at(-1), 'Printing 12 copies.');
  });

  test('a text answer is judged by the model (judge_answer): one it finds short is refused with its reason, a full one accepted', async () => {
    provider.script = (request) => {
      if (isJudge(request)) {
        return /Answer: .*street/i.test(lastUserText(request))
          ? { toolCalls: [{ name: 'judge_answer', input: { accepted: true } }] }
          : { toolCalls: [{ name: 'judge_answer', input: { accepted: false, reason: 'The street name is missing.' } }] };
      }
      return continuationOutcome(request) === 'answered' ? { text: 'Thanks, shipping there.' }
        : { text: 'Where should it go?', toolCalls: [{ name: 'ask_user', input: { question: 'What is the delivery address?', answer_type: 'text' } }] };
    };
    const u = await t.userWithAgent();
    const sent = await send(t, u, unique('Ship my order'));
    const [question] = (await listQuestions(t, u)).json().questions;
    assert.equal(question.answer_type, 'text');
    assert.deepEqual(await answerOne(t, u, question.request_id, 'Berlin'),
      { request_id: question.request_id, ok: true, accepted: false, reason: 'The street name is missing.' });
    const judged = provider.requests.at(-1)!;
    assert.ok(isJudge(judged));
    assert.match(lastUserText(judged), /Question: What is the delivery address\?\s+Answer: Berlin/);
    assert.equal((await answerOne(t, u, question.request_id, '1 Main Street, Berlin')).accepted, true);
    assert.equal(agentTexts(await settledTranscript(t, u, sent.sessionId, 2)).at(-1), 'Thanks, shipping there.');
  });

  test('a bulk of text answers is judged 8 at once, answers to one question one after the other; accepted ones settle in the entries\' order', async () => {
    const QUESTIONS = 10;
    let inFlight = 0;
    let mostInFlight = 0;
    let release!: () => void;
    const gate = new Promise<void>((resolve) => { release = resolve; });
    provider.script = async (request) => {
      const said = lastUserText(request);
      if (isJudge(request)) {
        inFlight++;
        mostInFlight = Math.max(mostInFlight, inFlight);
        await gate;
        // Later entries' verdicts come back first: the order of settling must not follow them.
        const entry = Number(/answer-(\d+)/.exec(said)?.[1] ?? 0);
        await new Promise((resolve) => setTimeout(resolve, (QUESTIONS - entry) * 15));
        inFlight--;
        return { toolCalls: [{ name: 'judge_answer', input: /refuse/.test(said) ? { accepted: false, reason: 'Refused.' } : { accepted: true } }] };
      }
      if (continuationOutcome(request) === 'answered') return { text: `Got ${endingToolResult(request)!.output.answer}` };
      return { toolCalls: [{ name: 'ask_user', input: { question: `Question ${/Q(\d+)/.exec(said)![1]}?`, answer_type: 'text' } }] };
    };
    const u = await t.userWithAgent();
    const sessions: string[] = [];
    for (let i = 0; i < QUESTIONS; i++) sessions.push((await send(t, u, unique(`Q${i}`))).sessionId);
    const ids = new Map<string, string>((await listQuestions(t, u)).json().questions.map((q: any) => [q.text, q.request_id]));
    const id = (i: number) => ids.get(`Question ${i}?`)!;
    const entries = [
      { request_id: id(0), text: 'answer-0' }, { request_id: id(0), text: 'answer-0 again' }, // the second is never judged
      { request_id: id(1), text: 'answer-1 refuse' }, { request_id: id(1), text: 'answer-1' }, // judged one after the other
      ...Array.from({ length: QUESTIONS - 2 }, (_, k) => ({ request_id: id(k + 2), text: `answer-${k + 2}` })),
    ];
    const judgesBefore = provider.requests.filter(isJudge).length;
    const answering = postAnswers(t, u, entries);
    const judgesSent = () => provider.requests.filter(isJudge).length - judgesBefore;
    for (const deadline = Date.now() + 5_000; judgesSent() < 8 && Date.now() < deadline;) await new Promise((resolve) => setTimeout(resolve, 5));
    await new Promise((resolve) => setTimeout(resolve, 200)); // room for a ninth, were there no bound
    release();
    const res = await answering;
    assert.equal(res.statusCode, 200, res.body);
    assert.equal(mostInFlight, 8);
    assert.deepEqual(res.json().results, [
      { request_id: id(0), ok: true, accepted: true },
      { request_id: id(0), ok: false, error: { code: 'already_answered', message: 'This question already has an accepted answer.' } },
      { request_id: id(1), ok: true, accepted: false, reason: 'Refused.' },
      ...Array.from({ length: QUESTIONS - 1 }, (_, k) => ({ request_id: id(k + 1), ok: true, accepted: true })),
    ]);
    const judged = provider.requests.filter(isJudge).slice(judgesBefore).map((request) => /Answer: (.*)/.exec(lastUserText(request))![1]);
    assert.equal(judged.length, QUESTIONS + 1);
    assert.ok(!judged.includes('answer-0 again'));
    // The agent's one line runs the resumed missions in the order their answers were settled.
    for (const sessionId of sessions) await settledTranscript(t, u, sessionId, 2);
    const resumed = provider.requests.map((request) => /^answer-(\d+)$/.exec(endingToolResult(request)?.output.answer)?.[1]).filter((n) => n !== undefined);
    assert.deepEqual(resumed.slice(-QUESTIONS), Array.from({ length: QUESTIONS }, (_, i) => String(i)));
  });

  test('one action or question per turn: the first call is taken, later ones ignored; an unknown answer_type becomes text', async () => {
    provider.script = () => ({
      toolCalls: [
        { name: 'ask_user', input: { question: 'Which colour?', answer_type: 'colour' } },
        { name: 'request_action', input: { kind: 'paint', summary: 'Paint it' } },
        { name: 'ask_user', input: { question: 'Which size?', answer_type: 'number' } },
      ],
    });
    const u = await t.userWithAgent();
    await send(t, u, unique('Paint the fence'));
    assert.deepEqual((await listQuestions(t, u)).json().questions.map((q: any) => [q.text, q.answer_type]), [['Which colour?', 'text']]);
    assert.deepEqual((await listActions(t, u)).json().actions, []);
  });
});

describe('a deployment\'s registered tools', () => {
  let provider: FakeModelProvider;
  let t: TestApp;
  const ran: string[] = [];
  const tools = new ToolRegistry()
    .register({ kind: 'lookup', needsPermission: false, description: 'Looks a word up', run: async (action) => { ran.push(action.summary); } });
  withModelApp({ provider: 'openai-compatible', name: 'm', apiKey: null, timeoutMs: 10_000, systemPrompt: null }, (started) => ({ provider, t } = started), { tools });

  test('are named to the model; one that needs no permission runs at once; no key sends no Authorization header', async () => {
    provider.script = (request) => continuationOutcome(request) === 'approved'
      ? { text: 'It means a small dog.' }
      : { toolCalls: [{ name: 'request_action', input: { kind: 'lookup', summary: 'Look up "pup"' } }] };
    const u = await t.userWithAgent();
    const sent = await send(t, u, unique('What is a pup?'));
    assert.match(sent.reply, /^Running "lookup": Look up "pup" \(operation_id op_\w+\); it needs no permission\.$/);
    assert.deepEqual(agentTexts(await settledTranscript(t, u, sent.sessionId, 2)).at(-1), 'It means a small dog.');
    assert.deepEqual(ran, ['Look up "pup"']);
    const first = provider.requests[0]!;
    const requestAction = first.body.tools.find((tool: any) => tool.function.name === 'request_action');
    assert.match(requestAction.function.description, /"lookup" \(Looks a word up; runs without asking\)/);
    assert.equal(first.headers.authorization, undefined);
    assert.equal(systemPrompt(first), DEFAULT_SYSTEM_PROMPT);
  });
});

describe('bounds set by MODEL_HISTORY_CHARACTERS and MODEL_MAX_OUTPUT_TOKENS', () => {
  let provider: FakeModelProvider;
  let t: TestApp;
  withModelApp({ provider: 'openai-compatible', name: 'm', apiKey: null, timeoutMs: 10_000, systemPrompt: null, historyCharacters: 70, maxOutputTokens: 123 },
    (started) => ({ provider, t } = started));

  test('only the latest earlier turns that fit the history\'s characters go along, each whole, and the message itself always; max_tokens is sent', async () => {
    provider.script = (request) => ({ text: `Re: ${lastUserText(request)}` });
    const u = await t.userWithAgent();
    const [a, b, c] = ['a'.repeat(30), 'b'.repeat(30), 'c'.repeat(100)];
    const { sessionId } = await send(t, u, a);
    await send(t, u, b, sessionId);
    await send(t, u, c, sessionId);
    // Before c: a (30), Re: a (34), b (30), Re: b (34). From the latest back, Re: b and b make 64
    // characters; Re: a would make 98, past 70. c, longer than 70 alone, goes whole all the same.
    const last = provider.requests.at(-1)!;
    assert.deepEqual(last.body.messages.filter((m: any) => m.role !== 'system').map((m: any) => messageText(m)), [b, `Re: ${b}`, c]);
    assert.equal(last.body.max_tokens, 123);
  });

  test('a continuation whose history has no turn of the person\'s left starts with a note saying so, then the call and its result', async () => {
    provider.script = (request) => continuationOutcome(request) === 'approved'
      ? { text: 'Done.' }
      : { text: 'Needs approval.', toolCalls: [{ name: 'request_action', input: { kind: 'email', summary: 'Email Al' } }] };
    const u = await t.userWithAgent();
    const { sessionId } = await send(t, u, unique('x'.repeat(100))); // longer than the 70 characters: left out
    const [action] = (await listActions(t, u)).json().actions;
    await decideOne(t, u, { operation_id: action.operation_id, decision: 'approve' });
    assert.equal(agentTexts(await settledTranscript(t, u, sessionId, 2)).at(-1), 'Done.');
    const approval = provider.requests.at(-1)!;
    assert.deepEqual(approval.body.messages.filter((m: any) => m.role !== 'system').map((m: any) => [m.role, m.content]).slice(0, 1),
      [['user', HISTORY_LEFT_OUT]]);
    assert.deepEqual(approval.body.messages.filter((m: any) => m.role !== 'system').map((m: any) => m.role), ['user', 'assistant', 'tool']);
    assert.equal(endingToolResult(approval)!.callId, action.operation_id);
  });
});

describe('anthropic', () => {
  let provider: FakeModelProvider;
  let t: TestApp;
  withModelApp({ provider: 'anthropic', name: 'claude-test', apiKey: KEY, timeoutMs: 10_000, systemPrompt: null }, (started) => ({ provider, t } = started));

  test('a plain message: the model\'s text is the reply; the key goes in x-api-key, the default system prompt in `system`', async () => {
    provider.script = (request) => ({ text: `Claude says: ${lastUserText(request)}` });
    const u = await t.userWithAgent();
    const text = unique('Hi Claude');
    assert.equal((await send(t, u, text)).reply, `Claude says: ${text}`);
    const request = provider.requests.at(-1)!;
    assert.equal(request.protocol, 'anthropic');
    assert.equal(request.body.model, 'claude-test');
    assert.equal(request.headers['x-api-key'], KEY);
    assert.equal(request.headers.authorization, undefined);
    assert.equal(systemPrompt(request), DEFAULT_SYSTEM_PROMPT);
  });

  test('a tool_use block for request_action becomes a pending action; approved, the reply lands', async () => {
    provider.script = (request) => continuationOutcome(request) === 'approved'
      ? { text: 'Booked.' }
      : { text: 'Booking needs your approval.', toolCalls: [{ name: 'request_action', input: { kind: 'booking', summary: 'Book a table for two', details: { seats: 2 } } }] };
    const u = await t.userWithAgent();
    const sent = await send(t, u, unique('Book dinner'));
    assert.equal(sent.reply, 'Booking needs your approval.');
    const [action] = (await listActions(t, u)).json().actions;
    assert.deepEqual([action.kind, action.summary, action.details], ['booking', 'Book a table for two', { seats: 2 }]);
    await decideOne(t, u, { operation_id: action.operation_id, decision: 'approve' });
    assert.equal(agentTexts(await settledTranscript(t, u, sent.sessionId, 2)).at(-1), 'Booked.');
    // The approval answers the model's own tool_use block; the roles alternate, as Anthropic requires.
    const approval = provider.requests.at(-1)!;
    assert.deepEqual(approval.body.messages.map((m: any) => m.role), ['user', 'assistant', 'user']);
    assert.deepEqual([endingToolResult(approval)!.callId, endingToolResult(approval)!.output.outcome], [action.operation_id, 'approved']);
  });
});
