import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { Progress, Tool } from '@modelcontextprotocol/client';
import { AjvJsonSchemaValidator } from '@modelcontextprotocol/client/validators/ajv';
import { startTestApp, type TestApp } from '../../testing/harness.ts';
import { mcpClient, structuredOf } from '../../testing/mcp.ts';
import { unique } from '../../testing/missions.ts';

/** Contract §9.6 through the MCP SDK's own client over HTTP: the tools, and a conversation from start to end. */
let t: TestApp;
// A short ceiling: a `!sleep` a little longer than it answers `processing`, and the reply then arrives through get_messages.
const CEILING_MS = 1000;
before(async () => { t = await startTestApp({ waitCeilingMs: CEILING_MS, duplicateWindowMs: 0 }); });
after(async () => { await t.close(); });

interface SendResult { session_id: string; status: string; message_ts: string; reply?: string; reply_ts?: string; awaiting: Array<Record<string, string>> }
/** The output schema advertises the result, or (with isError) the problem body: the result's alternative. */
const resultSchemaOf = (tool: Tool) => (tool.outputSchema as { anyOf: Array<{ properties?: Record<string, unknown> }> }).anyOf[0]!;

interface Transcript { status: string; messages: Array<{ role: string; text: string; ts: string; error?: string }>; awaiting: unknown[] }

test('tools/list shows every tool of §9.6 with its input and output schemas, annotations and a description', async () => {
  const u = await t.userWithAgent();
  const mcp = await mcpClient(t, u.key);
  const { tools } = await mcp.client.listTools();
  const byName = new Map(tools.map((tool) => [tool.name, tool]));
  assert.deepEqual([...byName.keys()].sort(), [
    'answer_questions', 'cancel', 'create_agent', 'decide_actions', 'get_messages', 'list_actions', 'list_agents', 'list_questions', 'send_message',
  ]);
  const readOnly = ['list_agents', 'get_messages', 'list_actions', 'list_questions'];
  const destructive = ['decide_actions', 'cancel'];
  for (const tool of tools) {
    assert.equal(tool.inputSchema.type, 'object', tool.name);
    assert.equal(tool.outputSchema?.type, 'object', tool.name);
    assert.ok(resultSchemaOf(tool).properties, `${tool.name}: its output schema names the result's fields`);
    assert.equal(JSON.stringify(tool.outputSchema).includes('"additionalProperties":false'), false, `${tool.name}: results may carry more fields (§0)`);
    assert.ok((tool.description ?? '').length > 80, `${tool.name}: a description a model can use`);
    assert.equal(tool.annotations?.readOnlyHint, readOnly.includes(tool.name), `${tool.name} readOnlyHint`);
    assert.equal(tool.annotations?.destructiveHint === true, destructive.includes(tool.name), `${tool.name} destructiveHint`);
  }
  // The arguments are the API's fields, from the same schemas.
  const send = byName.get('send_message')!;
  assert.deepEqual(send.inputSchema.required, ['text']);
  assert.deepEqual(Object.keys(send.inputSchema.properties ?? {}).sort(), ['agent_id', 'session_id', 'text']);
  assert.equal((send.inputSchema.properties as Record<string, { maxLength?: number }>).text?.maxLength, 32_000);
  assert.match(send.description ?? '', /waits up to 1 s.*get_messages.*after.*message_ts.*wait_seconds/s);
  assert.deepEqual(Object.keys(resultSchemaOf(send).properties ?? {}).sort(),
    ['agent_id', 'awaiting', 'error', 'message_ts', 'reply', 'reply_ts', 'session_id', 'status']);
  assert.deepEqual(Object.keys(byName.get('get_messages')!.inputSchema.properties ?? {}).sort(), ['after', 'limit', 'session_id', 'wait_seconds']);
  assert.deepEqual(Object.keys(byName.get('create_agent')!.inputSchema.properties ?? {}).sort(), ['agent_name', 'workspace_id']);
  const decision = (byName.get('decide_actions')!.inputSchema.properties as Record<string, { items?: { properties?: Record<string, { enum?: string[] }> } }>).decisions;
  assert.deepEqual(decision?.items?.properties?.decision?.enum, ['approve', 'approve_same_type', 'reject']);
  await mcp.close();
});

test('a conversation end to end: send, a slow turn that arrives through get_messages, an action approved, a question answered wrongly then rightly, cancel', async () => {
  const u = await t.userWithAgent({ plan: 'pro' });
  const mcp = await mcpClient(t, u.key);

  const agents = structuredOf<{ agents: Array<{ agent_id: string }> }>(await mcp.call('list_agents'));
  assert.deepEqual(agents.agents.map((a) => a.agent_id), [u.agentId]);
  const created = structuredOf<{ agent_id: string; name: string }>(await mcp.call('create_agent', { agent_name: 'Second' }));
  assert.equal(created.name, 'Second');

  const hello = structuredOf<SendResult>(await mcp.call('send_message', { text: 'hello', agent_id: u.agentId }));
  assert.equal(hello.status, 'completed');
  assert.equal(hello.reply, 'You said: hello');
  assert.deepEqual(hello.awaiting, []);
  const session = hello.session_id;

  // A turn longer than the ceiling: processing, then the reply through get_messages after message_ts, held until it is written.
  const slow = structuredOf<SendResult>(await mcp.call('send_message', { text: `!sleep ${CEILING_MS + 500} slow one`, session_id: session }));
  assert.equal(slow.status, 'processing');
  assert.equal(slow.session_id, session);
  let replies: Transcript['messages'] = [];
  for (let i = 0; i < 20 && replies.length === 0; i++) {
    replies = structuredOf<Transcript>(await mcp.call('get_messages', { session_id: session, after: slow.message_ts, wait_seconds: 5 })).messages;
  }
  assert.deepEqual(replies.map((m) => [m.role, m.text]), [['agent', 'You said: slow one']]);

  // An action: awaiting names it, decide_actions approves it, and the mission's next turn says it is done.
  const summary = unique('Send the report');
  const drafted = structuredOf<SendResult>(await mcp.call('send_message', { text: `!action email ${summary}`, session_id: session }));
  assert.equal(drafted.status, 'completed');
  const action = drafted.awaiting[0]!;
  assert.equal(action.type, 'action');
  assert.equal(action.summary, summary);
  const listed = structuredOf<{ actions: Array<{ operation_id: string }> }>(await mcp.call('list_actions', { session_id: session }));
  assert.deepEqual(listed.actions.map((a) => a.operation_id), [action.operation_id]);
  const decided = structuredOf<{ results: unknown[] }>(await mcp.call('decide_actions', { decisions: [{ operation_id: action.operation_id, decision: 'approve' }] }));
  assert.deepEqual(decided.results, [{ operation_id: action.operation_id, ok: true, outcome: 'approved', also_approved: [] }]);
  const done = structuredOf<Transcript>(await mcp.call('get_messages', { session_id: session, after: drafted.reply_ts, wait_seconds: 5 }));
  assert.deepEqual(done.messages.map((m) => m.text), [`Done: ${summary}`]);

  // A question: a wrong answer is refused with a reason (it stays open), a right one is accepted and noted.
  const asked = structuredOf<SendResult>(await mcp.call('send_message', { text: '!ask number How many copies?', session_id: session }));
  const question = asked.awaiting[0]!;
  assert.deepEqual([question.type, question.text, question.answer_type], ['question', 'How many copies?', 'number']);
  const open = structuredOf<{ questions: Array<{ request_id: string }> }>(await mcp.call('list_questions'));
  assert.deepEqual(open.questions.map((q) => q.request_id), [question.request_id]);
  const wrong = structuredOf<{ results: Array<{ ok: boolean; accepted: boolean; reason?: string }> }>(
    await mcp.call('answer_questions', { answers: [{ request_id: question.request_id, text: 'a few' }] }));
  assert.equal(wrong.results[0]?.accepted, false);
  assert.match(wrong.results[0]?.reason ?? '', /number/i);
  const right = structuredOf<{ results: unknown[] }>(await mcp.call('answer_questions', { answers: [{ request_id: question.request_id, text: '12' }] }));
  assert.deepEqual(right.results, [{ request_id: question.request_id, ok: true, accepted: true }]);
  const noted = structuredOf<Transcript>(await mcp.call('get_messages', { session_id: session, after: asked.reply_ts, wait_seconds: 5 }));
  assert.deepEqual(noted.messages.map((m) => m.text), ['Noted: 12']);

  // Cancel: a running turn stops, answered Cancelled.
  const long = structuredOf<SendResult>(await mcp.call('send_message', { text: '!sleep 60000', session_id: session }));
  assert.equal(long.status, 'processing');
  const cancelled = structuredOf<{ session_id: string; cancelled: number }>(await mcp.call('cancel', { session_id: session }));
  assert.deepEqual(cancelled, { session_id: session, cancelled: 1 });
  const after = structuredOf<Transcript>(await mcp.call('get_messages', { session_id: session, after: long.message_ts }));
  assert.deepEqual(after.messages.map((m) => [m.text, m.error]), [['Cancelled.', 'cancelled']]);
  assert.equal(after.status, 'idle');
  await mcp.close();
});

test('results and problem bodies both fit the advertised output schema, as a client that checks every structured content sees them', async () => {
  const u = await t.userWithAgent();
  const mcp = await mcpClient(t, u.key);
  const { tools } = await mcp.client.listTools();
  const validatorOf = (name: string) => new AjvJsonSchemaValidator().getValidator(tools.find((tool) => tool.name === name)!.outputSchema!);
  const sent = await mcp.call('send_message', { text: 'fits' });
  const refused = await mcp.call('get_messages', { session_id: 'ses_nope' });
  const invalid = await mcp.call('decide_actions', { decisions: 'all of them' });
  assert.equal(validatorOf('send_message')(structuredOf(sent)).valid, true);
  assert.equal(validatorOf('get_messages')(structuredOf(refused, true)).valid, true);
  assert.equal(validatorOf('decide_actions')(structuredOf(invalid, true)).valid, true);
  assert.equal(validatorOf('get_messages')({ session_id: 1 }).valid, false, 'the schema does check');
  await mcp.close();
});

test('send_message sends progress notifications while it waits, when the client asks for them', async () => {
  const u = await t.userWithAgent();
  const mcp = await mcpClient(t, u.key);
  const progress: Progress[] = [];
  const result = structuredOf<SendResult>(await mcp.call('send_message', { text: `!sleep ${CEILING_MS * 3}` }, (p) => progress.push(p)));
  assert.equal(result.status, 'processing');
  // One at once, then every quarter of this short ceiling (every 4 s under the default 25 s): increasing, the ceiling as total.
  assert.ok(progress.length >= 3, `${progress.length} progress notifications`);
  assert.ok(progress.every((p, i) => i === 0 || p.progress > progress[i - 1]!.progress), JSON.stringify(progress));
  assert.ok(progress.every((p) => p.total === CEILING_MS / 1000 && p.progress <= p.total + 0.5));
  assert.match(progress[0]?.message ?? '', /Waiting for the agent's reply/);
  structuredOf(await mcp.call('cancel', { session_id: result.session_id }));
  await mcp.close();
});
