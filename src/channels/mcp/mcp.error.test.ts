import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { API, listeningUrl, startTestApp, type TestApp } from '../../testing/harness.ts';
import { mcpClient, structuredOf, type McpTestClient } from '../../testing/mcp.ts';

/** Contract §9.6: every problem, an invalid argument included, is an isError tool result whose structured content is the API's problem body. */
let t: TestApp;
before(async () => { t = await startTestApp({ waitCeilingMs: 1000, duplicateWindowMs: 0 }); });
after(async () => { await t.close(); });

type ProblemBody = { type: string; title: string; status: number; code: string; detail: string; request_id: string; errors?: unknown[] } & Record<string, unknown>;
const problemOf = async (mcp: McpTestClient, tool: string, args: Record<string, unknown>) => structuredOf<ProblemBody>(await mcp.call(tool, args), true);
const withoutId = ({ request_id: _id, ...rest }: Record<string, unknown>) => rest;

test('invalid arguments: the API\'s 422 problem, with the same code, detail and errors', async () => {
  const u = await t.userWithAgent();
  const mcp = await mcpClient(t, u.key);
  const cases: Array<[string, Record<string, unknown>, string, { method: 'GET' | 'POST'; url: string; payload?: unknown }]> = [
    ['send_message', {}, 'text_empty', { method: 'POST', url: '/messages', payload: {} }],
    ['send_message', { text: '   ' }, 'text_empty', { method: 'POST', url: '/messages', payload: { text: '   ' } }],
    ['send_message', { text: 'x'.repeat(32_001) }, 'text_too_long', { method: 'POST', url: '/messages', payload: { text: 'x'.repeat(32_001) } }],
    ['send_message', { text: 'hi', session_id: 5 }, 'validation_failed', { method: 'POST', url: '/messages', payload: { text: 'hi', session_id: 5 } }],
    ['send_message', { text: 'nul \u0000 inside' }, 'validation_failed', { method: 'POST', url: '/messages', payload: { text: 'nul \u0000 inside' } }],
    // The stored-text rule comes before the text's own codes, and those before the other fields.
    ['send_message', { text: ' ', session_id: 'ses_\u0000' }, 'validation_failed', { method: 'POST', url: '/messages', payload: { text: ' ', session_id: 'ses_\u0000' } }],
    ['send_message', { text: ' ', session_id: 5 }, 'text_empty', { method: 'POST', url: '/messages', payload: { text: ' ', session_id: 5 } }],
    ['create_agent', { agent_name: ' ' }, 'validation_failed', { method: 'POST', url: '/agents', payload: { agent_name: ' ' } }],
    ['get_messages', { session_id: 'ses_x', after: 'yesterday' }, 'validation_failed', { method: 'GET', url: '/sessions/ses_x/messages?after=yesterday' }],
  ];
  for (const [tool, args, code, api] of cases) {
    const problem = await problemOf(mcp, tool, args);
    assert.equal(problem.code, code, `${tool} ${JSON.stringify(args).slice(0, 60)}`);
    assert.equal(problem.status, 422);
    assert.match(problem.request_id, /^[0-9a-f-]{36}$/);
    const res = await t.inject({ method: api.method, url: `${API}${api.url}`, headers: u.auth, ...(api.payload === undefined ? {} : { payload: api.payload as object }) });
    assert.equal(res.statusCode, 422);
    assert.deepEqual(withoutId(problem), withoutId(res.json()), `${tool}: the API's body`);
  }
  // What only the tools take as numbers: judged by the same bounds, named by their field.
  const limit = await problemOf(mcp, 'get_messages', { session_id: 'ses_x', limit: 0 });
  assert.equal(limit.code, 'validation_failed');
  assert.deepEqual((limit.errors as Array<{ path: string }>).map((e) => e.path), ['limit']);
  assert.equal((await problemOf(mcp, 'get_messages', { session_id: 'ses_x', wait_seconds: -1 })).code, 'validation_failed');
  assert.equal((await problemOf(mcp, 'get_messages', {})).code, 'validation_failed');
  assert.equal((await problemOf(mcp, 'decide_actions', { decisions: [] })).code, 'validation_failed');
  assert.equal((await problemOf(mcp, 'answer_questions', { answers: 'twelve' })).code, 'validation_failed');
  await mcp.close();
});

test('problems of the objects and of the agent: 404s, agent_required, agent_limit_reached, agent_failed with its session', async () => {
  const u = await t.userWithAgent({ plan: 'pro' });
  const mcp = await mcpClient(t, u.key);
  assert.equal((await problemOf(mcp, 'send_message', { text: 'hi', agent_id: 'agt_nope' })).code, 'agent_not_found');
  assert.equal((await problemOf(mcp, 'send_message', { text: 'hi', session_id: 'ses_nope' })).code, 'session_not_found');
  assert.equal((await problemOf(mcp, 'cancel', { session_id: 'ses_nope' })).code, 'session_not_found');
  assert.equal((await problemOf(mcp, 'create_agent', { agent_name: 'x', workspace_id: 'wsp_nope' })).code, 'workspace_not_found');
  structuredOf(await mcp.call('create_agent', { agent_name: 'Second' }));
  assert.equal((await problemOf(mcp, 'send_message', { text: 'to whom?' })).code, 'agent_required');

  const failed = await problemOf(mcp, 'send_message', { text: '!fail on purpose', agent_id: u.agentId });
  assert.deepEqual([failed.code, failed.status], ['agent_failed', 502]);
  assert.match(String(failed.session_id), /^ses_/);
  const transcript = structuredOf<{ messages: Array<{ error?: string }> }>(await mcp.call('get_messages', { session_id: failed.session_id, after: failed.message_ts }));
  assert.equal(transcript.messages[0]?.error, 'agent_failed');

  const free = await t.userWithAgent({ plan: 'free' });
  const freeMcp = await mcpClient(t, free.key);
  assert.deepEqual([(await problemOf(freeMcp, 'create_agent', { agent_name: 'one too many' })).code], ['agent_limit_reached']);
  // One bad entry of a bulk tool fails alone: a result, not a problem.
  const decided = structuredOf<{ results: Array<{ ok: boolean; error?: { code: string } }> }>(
    await mcp.call('decide_actions', { decisions: [{ operation_id: 'op_nope', decision: 'approve' }, { operation_id: 'op_x', decision: 'maybe' }] }));
  assert.deepEqual(decided.results.map((r) => r.error?.code), ['not_found', 'invalid_decision']);
  await mcp.close();
  await freeMcp.close();
});

test('a database outage during a call is the API\'s 503 problem, the same body, as an isError result (not a 500)', async (ctx) => {
  const u = await t.userWithAgent();
  const mcp = await mcpClient(t, u.key);
  // What node:sqlite throws for a database another process holds locked.
  ctx.mock.method(t.runtime.services.agents, 'listForUser', async () => {
    throw Object.assign(new Error('database is locked'), { code: 'ERR_SQLITE_ERROR', errcode: 5 });
  });
  const problem = await problemOf(mcp, 'list_agents', {});
  assert.deepEqual([problem.status, problem.code], [503, 'service_unavailable']);
  const res = await t.inject({ method: 'GET', url: `${API}/agents`, headers: u.auth });
  assert.equal(res.statusCode, 503);
  assert.deepEqual(withoutId(problem), withoutId(res.json()), 'the API\'s body');
  await mcp.close();
});

test('a stateless server: GET and DELETE are 405 (no stream, no session), a body that is not JSON is the API\'s 400', async () => {
  const u = await t.user();
  const url = `${await listeningUrl(t)}/mcp`;
  for (const method of ['GET', 'DELETE']) {
    const res = await fetch(url, { method, headers: { authorization: `Bearer ${u.key}`, accept: 'text/event-stream' } });
    assert.equal(res.status, 405, method);
    assert.equal(res.headers.get('allow'), 'POST');
    assert.equal(((await res.json()) as { error: { code: number } }).error.code, -32000);
  }
  const res = await fetch(url, { method: 'POST', body: '{"jsonrpc":', headers: { authorization: `Bearer ${u.key}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' } });
  assert.equal(res.status, 400);
  assert.equal(((await res.json()) as { code: string }).code, 'malformed_json');
});
