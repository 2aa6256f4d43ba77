import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { AgentChannel, ApiError, BulkError } from '../src/index.ts';
import { startFaultyProxy, type FaultyProxy } from './proxy.ts';
import { listeningApp } from './server.ts';

/** Problems, bulk failures, retries and refusals, against the real server (and a faulty network in front of it). */
const served = listeningApp({ waitCeilingMs: 1000 });
let proxy: FaultyProxy | undefined;
/** The faulty network in front of the server (started once the server listens). */
const viaProxy = async () => (proxy ??= await startFaultyProxy(served.url));
after(async () => { await proxy?.close(); });

const problemOf = (error: unknown) => {
  assert.ok(error instanceof ApiError, `an ApiError, not ${String(error)}`);
  return error;
};

test('every problem the server answers is an ApiError carrying its body', async () => {
  const { client, user } = await served.account(1);
  const unauthorized = problemOf(await new AgentChannel({ baseUrl: served.url, apiKey: `${user.key}x` }).agents.list().catch((e) => e));
  assert.equal(unauthorized.status, 401);
  assert.equal(unauthorized.code, 'unauthorized');
  assert.match(unauthorized.requestId ?? '', /\S/);
  assert.equal(unauthorized.problem.request_id, unauthorized.requestId);

  const missing = problemOf(await client.transcript('ses_doesnotexist').next().catch((e) => e));
  assert.deepEqual([missing.status, missing.code], [404, 'session_not_found']);
  const blank = problemOf(await client.send('   ').catch((e) => e));
  assert.deepEqual([blank.status, blank.code], [422, 'text_empty']);
  const invalid = problemOf(await client.agents.create('x'.repeat(101)).catch((e) => e));
  assert.equal(invalid.code, 'validation_failed');
  assert.equal(invalid.problem.errors?.[0]?.path, 'agent_name');
});

test('sendAndWait rejects with agent_failed whether the agent failed within the wait ceiling or after it', async () => {
  const { client } = await served.account(1);
  const soon = problemOf(await client.sendAndWait('!fail now').catch((e) => e));
  assert.deepEqual([soon.status, soon.code], [502, 'agent_failed']);
  assert.match(soon.problem.session_id ?? '', /^ses_/);
  const late = problemOf(await client.sendAndWait('!sleep 1500 !fail later').catch((e) => e));
  assert.deepEqual([late.status, late.code], [502, 'agent_failed']);
});

test('strict bulk mode throws a BulkError naming the failed entries; the others are applied', async () => {
  const { client } = await served.account(1);
  const drafted = await client.sendAndWait('!action email Send it');
  const operationId = (drafted.awaiting[0] as { operation_id: string }).operation_id;
  const lenient = await client.actions.reject(['op_nope'], 'no');
  assert.equal(lenient[0]!.ok, false);
  const thrown = await client.actions.approve(['op_nope', operationId], { strict: true }).catch((e) => e);
  assert.ok(thrown instanceof BulkError, String(thrown));
  assert.equal(thrown.results.length, 2);
  assert.deepEqual(thrown.failed.map((r) => !r.ok && r.error.code), ['not_found']);
  assert.ok(thrown.results[1]!.ok, 'the good entry was approved');
  assert.deepEqual(await client.actions.list(), []);

  await client.sendAndWait('!ask yesno Go ahead?');
  const [question] = await client.questions.list();
  const refused = await client.questions.answerAll([{ request_id: question!.request_id, text: 'perhaps' }], { strict: true }).catch((e) => e);
  assert.ok(refused instanceof BulkError);
  assert.equal((await client.questions.list()).length, 1, 'still open');
});

test('429 from the server: Retry-After longer than the client will wait is an ApiError saying how long', async () => {
  const { client } = await served.account(1, { rateLimit: 2, client: { retry: { maxWaitMs: 1000 } } });
  await client.agents.list();
  await client.agents.list();
  const limited = problemOf(await client.agents.list().catch((e) => e));
  assert.deepEqual([limited.status, limited.code], [429, 'rate_limited']);
  assert.ok(limited.retryAfterSeconds! > 1, `Retry-After ${limited.retryAfterSeconds}`);
});

test('429 and 503 with Retry-After, and 409 idempotency_key_in_use, are waited out and retried', async () => {
  const { user } = await served.account(1);
  const proxy = await viaProxy();
  const client = new AgentChannel({ baseUrl: proxy.url, apiKey: user.key });
  proxy.failNext('GET', /\/agents$/, { status: 429, headers: { 'retry-after': '1', 'content-type': 'application/problem+json' }, body: '{"status":429,"code":"rate_limited"}' });
  proxy.failNext('GET', /\/agents$/, { status: 503, headers: { 'retry-after': '1' } });
  const started = Date.now();
  const seenBefore = proxy.seen.length;
  assert.equal((await client.agents.list()).length, 1);
  assert.ok(Date.now() - started >= 1900, 'waited a second after each');
  assert.equal(proxy.seen.slice(seenBefore).filter((r) => r.endsWith('/agents')).length, 3);

  proxy.failNext('POST', /\/messages$/, { status: 409, headers: { 'content-type': 'application/problem+json' }, body: '{"status":409,"code":"idempotency_key_in_use"}' });
  const sent = await client.send('once');
  assert.equal(sent.reply, 'You said: once');
});

test('a send whose answer was lost is retried with its Idempotency-Key: one turn, not two', async () => {
  const { user } = await served.account(1);
  const proxy = await viaProxy();
  const client = new AgentChannel({ baseUrl: proxy.url, apiKey: user.key });
  proxy.failNext('POST', /\/messages$/, 'drop-after-forward');
  const seenBefore = proxy.seen.length;
  const sent = await client.send('book the flight');
  assert.equal(sent.reply, 'You said: book the flight');
  assert.equal(proxy.seen.slice(seenBefore).filter((r) => r.startsWith('POST')).length, 2, 'sent twice');
  const page = await client.transcript(sent.session_id).next();
  const turns = page.done ? [] : page.value.messages;
  assert.deepEqual(turns.map((m) => m.text), ['book the flight', 'You said: book the flight']);

  // A decision carries no Idempotency-Key: an answer lost after sending is not guessed at.
  const drafted = await client.sendAndWait('!action email Send it');
  proxy.failNext('POST', /\/actions\/decisions$/, 'drop-after-forward');
  await assert.rejects(client.actions.approve((drafted.awaiting[0] as { operation_id: string }).operation_id), TypeError);
});

test('an event stream answered 502 (a gateway while the server restarts) reconnects and goes on from where it was', async () => {
  const { user } = await served.account(1);
  const proxy = await viaProxy();
  const client = new AgentChannel({ baseUrl: proxy.url, apiKey: user.key });
  const before = await client.send('before the stream');
  const { events } = await client.eventsPage({ sessionId: before.session_id });
  const after = events.at(-1)!.id;
  proxy.failNext('GET', /\/events$/, { status: 502, headers: { 'content-type': 'text/html' }, body: '<h1>Bad gateway</h1>' });
  const causes: unknown[] = [];
  const signal = AbortSignal.timeout(20_000);
  const stream = client.events({ after, signal, onReconnect: (cause) => causes.push(cause) });
  const next = stream.next();
  await client.send('while it reconnects', { sessionId: before.session_id });
  const event = (await next).value!;
  assert.equal(event.type, 'turn.completed');
  assert.equal((event.data as { text: string }).text, 'You said: while it reconnects');
  assert.equal((causes[0] as ApiError).status, 502);
  await stream.return(undefined);
});
