import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { after, before, test } from 'node:test';
import pino from 'pino';
import { buildApp } from '../../app.ts';
import { API, listeningUrl, startTestApp, type TestApp } from '../../testing/harness.ts';
import { mcpClient, structuredOf } from '../../testing/mcp.ts';
import { sample, scrape } from '../../testing/metrics.ts';

/** Contract §9.6 and §0 at /mcp: the API's key check, 401s, rate limit, other accounts' objects, the Origin check; its requests logged and counted. */
let t: TestApp;
let base: string;
before(async () => {
  t = await startTestApp({ waitCeilingMs: 1000 });
  base = await listeningUrl(t);
});
after(async () => { await t.close(); });

const LIST_TOOLS = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' });
const post = (headers: Record<string, string>, body = LIST_TOOLS) => fetch(`${base}/mcp`, {
  method: 'POST', body, headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...headers },
});
const without = (body: Record<string, unknown>, ...fields: string[]) => Object.fromEntries(Object.entries(body).filter(([k]) => !fields.includes(k)));

test('a missing, malformed, unknown or revoked key: the API\'s 401, at the HTTP level, before any MCP', async () => {
  const u = await t.user();
  const apiRefusal = await t.inject({ method: 'GET', url: `${API}/agents`, headers: { authorization: 'Bearer nope' } });
  const refusedHeaders: Array<Record<string, string>> = [{}, { authorization: 'Bearer nope' }, { authorization: `Bearer ${u.key}x` }, { authorization: u.key }];
  for (const headers of refusedHeaders) {
    const res = await post(headers);
    assert.equal(res.status, 401, JSON.stringify(headers));
    assert.equal(res.headers.get('www-authenticate'), 'Bearer');
    assert.equal(res.headers.get('content-type'), 'application/problem+json; charset=utf-8');
    assert.equal(res.headers.get('ratelimit'), null, 'a 401 counts against no quota');
    assert.deepEqual(without(await res.json() as Record<string, unknown>, 'request_id'), without(apiRefusal.json(), 'request_id'));
  }
  // The SDK's client cannot connect without a key; with one it can, until the key is revoked: the very next request is refused.
  await assert.rejects(mcpClient(t, null));
  const mcp = await mcpClient(t, u.key);
  structuredOf(await mcp.call('list_agents'));
  await t.runtime.services.keys.revoke(u.id, u.keyId);
  await assert.rejects(mcp.call('list_agents'));
  assert.equal(mcp.exchanges.at(-1)?.status, 401);
  await mcp.close();
});

test('another account\'s session is session_not_found, as a missing one is', async () => {
  const owner = await t.userWithAgent();
  const other = await t.userWithAgent();
  const mine = await mcpClient(t, owner.key);
  // An action whose summary names it, so that a list leaking it would show the word.
  const sent = structuredOf<{ session_id: string }>(await mine.call('send_message', { text: '!action email Send the private report' }));
  const theirs = await mcpClient(t, other.key);
  const missing = structuredOf<Record<string, unknown>>(await theirs.call('get_messages', { session_id: 'ses_missing' }), true);
  assert.equal(missing.code, 'session_not_found');
  for (const [tool, args] of [
    ['get_messages', { session_id: sent.session_id }], ['cancel', { session_id: sent.session_id }],
    ['send_message', { text: 'intrude', session_id: sent.session_id }],
  ] as const) {
    const refused = structuredOf<Record<string, unknown>>(await theirs.call(tool, args), true);
    assert.deepEqual(without(refused, 'request_id'), without(missing, 'request_id'), tool);
  }
  assert.ok(JSON.stringify(await mine.call('list_actions', { session_id: sent.session_id })).includes('private report'));
  assert.equal(JSON.stringify(await theirs.call('list_actions', { session_id: sent.session_id })).includes('private'), false);
  await mine.close();
  await theirs.close();
});

test('every MCP request counts once against the key\'s rate limit, shared with the API; past it, 429 with Retry-After', async () => {
  const limit = 6;
  const u = await t.userWithAgent({ rateLimit: limit });
  const mcp = await mcpClient(t, u.key);
  await mcp.call('list_agents');
  await mcp.call('list_questions');
  const counted = mcp.exchanges.map((e) => e.headers.get('ratelimit'));
  assert.ok(counted.length >= 2);
  // Each HTTP request took one: remaining goes down by one at each (the SDK sends some requests at
  // once, so their answers may come back in another order than their counts were taken).
  const remaining = counted.map((h) => Number(/r=(\d+)/.exec(h ?? '')?.[1])).sort((a, b) => b - a);
  assert.deepEqual(remaining, counted.map((_h, i) => limit - 1 - i));
  assert.ok(mcp.exchanges.every((e) => e.headers.get('ratelimit-policy') === `"key";q=${limit};w=60`));
  // The rest of the minute's quota, through the API, then MCP is refused at the HTTP level.
  for (let i = counted.length; i < limit; i++) {
    assert.equal((await t.inject({ method: 'GET', url: `${API}/agents`, headers: u.auth })).statusCode, 200);
  }
  await assert.rejects(mcp.call('list_agents'));
  const refused = mcp.exchanges.at(-1)!;
  assert.equal(refused.status, 429);
  assert.ok(Number(refused.headers.get('retry-after')) > 0);
  await mcp.close();
});

test('a page of another site is refused (403) before its key counts; a client that sends no Origin, or this site\'s, is served', async () => {
  const u = await t.user({ rateLimit: 100 });
  const auth = { authorization: `Bearer ${u.key}` };
  for (const origin of ['http://evil.example', 'null', `${base}.evil.example`]) {
    const res = await post({ ...auth, origin });
    assert.equal(res.status, 403, origin);
    assert.equal(((await res.json()) as { code: string }).code, 'forbidden');
    assert.equal(res.headers.get('ratelimit'), null, 'not counted');
  }
  assert.equal((await post({ ...auth, 'sec-fetch-site': 'cross-site', origin: base })).status, 403);
  // The Origin is judged before the key: no key, or a wrong one, is still the 403, not the 401.
  for (const key of [{}, { authorization: 'Bearer ak_nope_nope' }] as Array<Record<string, string>>) {
    assert.equal((await post({ ...key, origin: 'http://evil.example' })).status, 403, JSON.stringify(key));
  }
  for (const headers of [auth, { ...auth, origin: base }, { ...auth, origin: base, 'sec-fetch-site': 'same-origin' }]) {
    const res = await post(headers);
    assert.equal(res.status, 200, JSON.stringify(headers));
    assert.match(res.headers.get('ratelimit') ?? '', /^"key";r=\d+;t=\d+$/);
  }
});

test('/mcp requests carry X-Request-Id and the rate limit headers, and are counted in the metrics and written to the access log', async () => {
  const u = await t.user();
  const before = sample(await scrape(t), 'http_requests_total', { method: 'POST', route: '/mcp', status: '200' });
  const res = await post({ authorization: `Bearer ${u.key}` });
  assert.equal(res.status, 200);
  assert.match(res.headers.get('x-request-id') ?? '', /^[0-9a-f-]{36}$/);
  assert.ok(res.headers.get('ratelimit-policy'));
  assert.match(await res.text(), /send_message/);
  assert.equal(sample(await scrape(t), 'http_requests_total', { method: 'POST', route: '/mcp', status: '200' }), before + 1);

  const lines: Array<Record<string, unknown>> = [];
  const sink = new Writable({ write(chunk, _encoding, done) { lines.push(JSON.parse(String(chunk))); done(); } });
  const logged = await buildApp(t.runtime, { log: pino({ level: 'info' }, sink) });
  try {
    const address = await logged.listen({ port: 0, host: '127.0.0.1' });
    const answer = await fetch(`${address}/mcp`, {
      method: 'POST', body: LIST_TOOLS,
      headers: { authorization: `Bearer ${u.key}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
    });
    await answer.text();
    const id = answer.headers.get('x-request-id');
    await new Promise((resolve) => setTimeout(resolve, 50)); // the line is written as the answer ends
    const line = lines.find((l) => l.reqId === id);
    assert.deepEqual([line?.method, line?.url, line?.status, line?.msg], ['POST', '/mcp', 200, 'request']);
    assert.equal(JSON.stringify(lines).includes(u.key), false, 'no key in the log');
  } finally {
    await logged.close();
  }
});
