import assert from 'node:assert/strict';
import { connect, type AddressInfo } from 'node:net';
import { after, before, test } from 'node:test';
import type { LightMyRequestResponse } from 'fastify';
import { sql } from 'kysely';
import { buildApp, type AppOptions } from '../../../app.ts';
import { API, startTestApp, type TestApp, type TestUser, withTestApp } from '../../../testing/harness.ts';

let t: TestApp;
let u: TestUser;
before(async () => { t = await startTestApp(); u = await t.user(); });
after(async () => { await t.close(); });

/** Asserts an RFC 9457 body of the contract's shape with this status and code. */
function assertProblem(res: LightMyRequestResponse, status: number, code: string): Record<string, unknown> {
  assert.equal(res.statusCode, status, res.body);
  assert.equal(res.headers['content-type'], 'application/problem+json; charset=utf-8');
  const body = res.json();
  assert.equal(body.status, status);
  assert.equal(body.code, code);
  for (const field of ['type', 'title', 'detail', 'request_id']) assert.equal(typeof body[field], 'string', field);
  assert.equal(body.request_id, res.headers['x-request-id']);
  assert.doesNotMatch(res.body, /\bat .+:\d+:\d+|node_modules|\bselect\b|\binsert\b|sqlite|postgres/i);
  return body;
}

const postAgents = (headers: Record<string, string>, payload: string | Buffer) =>
  t.inject({ method: 'POST', url: `${API}/agents`, headers: { ...u.auth, ...headers }, payload });

test('400 malformed_json for a body that is not JSON', async () => {
  assertProblem(await postAgents({ 'content-type': 'application/json' }, '{"agent_name": "x",'), 400, 'malformed_json');
  assertProblem(await postAgents({ 'content-type': 'application/json' }, 'not json at all'), 400, 'malformed_json');
});

test('400 malformed_json for bytes that are not UTF-8, and nothing is stored', async () => {
  const pro = await t.user({ plan: 'pro' });
  // "caf\xe9": Latin-1, not UTF-8; read as UTF-8 it would have been stored as "caf\uFFFD".
  const latin1 = Buffer.concat([Buffer.from('{"agent_name":"caf'), Buffer.from([0xe9]), Buffer.from('"}')]);
  const res = await t.inject({ method: 'POST', url: `${API}/agents`, headers: { ...pro.auth, 'content-type': 'application/json' }, payload: latin1 });
  assert.match(String(assertProblem(res, 400, 'malformed_json').detail), /UTF-8/);
  assert.deepEqual(await t.runtime.services.agents.listForUser(pro.id), []);
  // The same name in UTF-8 is fine, and a byte order mark is allowed.
  const utf8 = await t.inject({ method: 'POST', url: `${API}/agents`, headers: { ...pro.auth, 'content-type': 'application/json' }, payload: Buffer.from('\uFEFF{"agent_name":"café"}') });
  assert.equal(utf8.statusCode, 201, utf8.body);
  assert.equal(utf8.json().name, 'café');
});

test('415 unsupported_media_type for a compressed body (Content-Encoding), and nothing is stored', async () => {
  const pro = await t.user({ plan: 'pro' });
  for (const coding of ['gzip', 'br', 'gzip, identity']) {
    const res = await t.inject({ method: 'POST', url: `${API}/agents`, headers: { ...pro.auth, 'content-type': 'application/json', 'content-encoding': coding }, payload: '{"agent_name":"zipped"}' });
    assertProblem(res, 415, 'unsupported_media_type');
  }
  assert.deepEqual(await t.runtime.services.agents.listForUser(pro.id), []);
  const identity = await t.inject({ method: 'POST', url: `${API}/agents`, headers: { ...pro.auth, 'content-type': 'application/json', 'content-encoding': 'identity' }, payload: '{"agent_name":"plain"}' });
  assert.equal(identity.statusCode, 201, identity.body);
});

test('a GET that carries a body has it judged like any other (after auth and the rate limit); a valid one is ignored', async () => {
  const get = (headers: Record<string, string>, payload?: string) => t.inject({ method: 'GET', url: `${API}/agents`, headers, ...(payload === undefined ? {} : { payload }) });
  assertProblem(await get({ ...u.auth, 'content-type': 'text/plain' }, 'hello'), 415, 'unsupported_media_type');
  assertProblem(await get({ ...u.auth }, 'hello'), 415, 'unsupported_media_type'); // a body with no type at all
  assertProblem(await get({ ...u.auth, 'content-type': 'application/json' }, '{bad'), 400, 'malformed_json');
  assertProblem(await get({ ...u.auth, 'content-type': 'application/json' }, JSON.stringify({ p: 'p'.repeat(1024 * 1024) })), 413, 'payload_too_large');
  const ignored = await get({ ...u.auth, 'content-type': 'application/json' }, '{"anything":1}');
  assert.equal(ignored.statusCode, 200, ignored.body);
  assert.equal((await get({ ...u.auth })).statusCode, 200);
  // A valid body is not read as input: text the stored-text rule refuses goes unjudged.
  assert.equal((await get({ ...u.auth, 'content-type': 'application/json' }, '{"a":"\\u0000"}')).statusCode, 200);
  // No body, whatever Content-Type a client sends along out of habit: nothing to judge.
  for (const type of ['application/json', 'text/plain']) {
    assert.equal((await get({ ...u.auth, 'content-type': type })).statusCode, 200, type);
    assert.equal((await get({ ...u.auth, 'content-type': type, 'content-length': '0' })).statusCode, 200, type);
  }
  // The route is judged first: a GET with a body to no route is the 404 of no route.
  const nowhere = await t.inject({ method: 'GET', url: `${API}/nowhere`, headers: { ...u.auth, 'content-type': 'text/plain' }, payload: 'hello' });
  assertProblem(nowhere, 404, 'not_found');
  // Over a real socket too, chunked: an empty body is none; a big one is refused once past 1 MiB.
  const server = await withListening();
  try {
    const exchange = (body: string) => rawExchange(server, `GET ${API}/agents HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${u.key}\r\n`
      + `Content-Type: application/json\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n${body}0\r\n\r\n`);
    assert.match(await exchange(''), /^HTTP\/1\.1 200 /);
    const chunk = 'x'.repeat(64 * 1024);
    assert.match(await exchange(`${(chunk.length).toString(16)}\r\n${chunk}\r\n`.repeat(17)), /^HTTP\/1\.1 413 /);
  } finally {
    await server.close();
  }
  // Outside the API (health, the web app's pages), a GET's body is left unread, as before.
  for (const url of ['/healthz', '/login']) {
    const res = await t.inject({ method: 'GET', url, headers: { 'content-type': 'text/plain' }, payload: 'hello' });
    assert.equal(res.statusCode, 200, url);
  }
  // The contract's order: no key is 401 and a spent quota 429, whatever the body.
  assertProblem(await get({ 'content-type': 'text/plain' }, 'hello'), 401, 'unauthorized');
  const one = await t.user({ rateLimit: 1 });
  assert.equal((await get({ ...one.auth })).statusCode, 200);
  assertProblem(await get({ ...one.auth, 'content-type': 'text/plain' }, 'hello'), 429, 'rate_limited');
});

test('HEAD answers as its GET would, without a body: auth, rate limit and a body sent along judged alike', async () => {
  const one = await t.user({ rateLimit: 2 });
  const head = (headers: Record<string, string>, payload?: string) => t.inject({ method: 'HEAD', url: `${API}/agents`, headers, ...(payload === undefined ? {} : { payload }) });
  const listed = await t.inject({ method: 'GET', url: `${API}/agents`, headers: one.auth });
  const headed = await head(one.auth);
  assert.equal(headed.statusCode, 200);
  assert.equal(headed.body, '');
  assert.equal(headed.headers['content-type'], listed.headers['content-type']);
  assert.equal(headed.headers['content-length'], listed.headers['content-length']);
  assert.equal(headed.headers['ratelimit'], '"key";r=0;t=60', 'it counts against the key like the GET');
  assert.equal((await head(one.auth)).statusCode, 429);
  const unauthorized = await head({});
  assert.equal(unauthorized.statusCode, 401);
  assert.equal(unauthorized.headers['www-authenticate'], 'Bearer');
  for (const [headers, payload, status] of [
    [{ 'content-type': 'application/json' }, '{bad', 400],
    [{ 'content-type': 'text/plain' }, 'hello', 415],
    [{ 'content-type': 'application/json' }, '{"anything":1}', 200],
  ] as const) {
    const res = await head({ ...u.auth, ...headers }, payload);
    assert.equal(res.statusCode, status, `${headers['content-type']} ${payload}`);
    assert.equal(res.body, '');
  }
});

test('413 payload_too_large for a body over 1 MiB', async () => {
  const big = JSON.stringify({ agent_name: 'x', padding: 'p'.repeat(1024 * 1024) });
  assertProblem(await postAgents({ 'content-type': 'application/json' }, big), 413, 'payload_too_large');
});

test('a body of just under 1 MiB is read (and judged on its fields)', async () => {
  const body = JSON.stringify({ agent_name: 'x'.repeat(101), padding: '' });
  const padded = JSON.stringify({ agent_name: 'x'.repeat(101), padding: 'p'.repeat(1024 * 1024 - body.length - 1) });
  assert.ok(Buffer.byteLength(padded) < 1024 * 1024);
  assertProblem(await postAgents({ 'content-type': 'application/json' }, padded), 422, 'validation_failed');
});

test('valid JSON with __proto__ or constructor.prototype keys is read, those keys dropped (nothing polluted)', async () => {
  const pro = await t.user({ plan: 'pro' });
  const post = (payload: string) => t.inject({ method: 'POST', url: `${API}/agents`, headers: { ...pro.auth, 'content-type': 'application/json' }, payload });
  const proto = await post('{"agent_name":"Proto","__proto__":{"polluted":"yes"}}');
  assert.equal(proto.statusCode, 201, proto.body);
  assert.equal(proto.json().name, 'Proto');
  const ctor = await post('{"agent_name":"Ctor","constructor":{"prototype":{"polluted":"yes"}}}');
  assert.equal(ctor.statusCode, 201, ctor.body);
  assert.equal(ctor.json().name, 'Ctor');
});

test('a request the HTTP parser refuses still gets a problem body, over a real socket', async () => {
  const server = await withListening();
  try {
    const badLength = await rawExchange(server, 'POST /api/v1/api-channel/messages HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n');
    assertRawProblem(badLength, 400, 'malformed_request');
    const hugeHeader = await rawExchange(server, `GET /api/v1/api-channel/agents HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${'a'.repeat(20_000)}\r\n\r\n`);
    assertRawProblem(hugeHeader, 431, 'headers_too_large');
  } finally {
    await server.close();
  }
});

test('a request whose body never finishes arriving gets 408 request_timeout once REQUEST_TIMEOUT_MS is up, and its connection closes', async () => {
  const server = await withListening({ requestTimeoutMs: 1000 });
  try {
    // 10 of the 100 bytes announced, then nothing: without a request timeout, held for ever.
    const stalled = await rawExchange(server, `POST /api/v1/api-channel/messages HTTP/1.1\r\nHost: x\r\n${'Authorization: Bearer '}${u.key}\r\n`
      + 'Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{"text":"h');
    assertRawProblem(stalled, 408, 'request_timeout');
    // The key was checked and the request counted: the answer says so, as every authenticated one does.
    assert.match(stalled, /^RateLimit-Policy: "key";q=\d+;w=60\r$/m, stalled);
    assert.match(stalled, /^RateLimit: "key";r=\d+;t=\d+\r$/m, stalled);
    // Outside the API (no key asked for), none.
    const unkeyed = await rawExchange(server, 'POST /login HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 100\r\n\r\nemail=');
    assertRawProblem(unkeyed, 408, 'request_timeout');
    assert.doesNotMatch(unkeyed, /^RateLimit/m);
  } finally {
    await server.close();
  }
});

test('a request answered before its body arrived (a 401) whose body then never comes gets that one answer, not a 408 after it', async () => {
  const server = await withListening({ requestTimeoutMs: 1000 });
  try {
    const exchange = await rawExchange(server, `POST ${API}/messages HTTP/1.1\r\nHost: x\r\n`
      + 'Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{"te');
    const answers = exchange.match(/HTTP\/1\.1 \d{3}/g);
    assert.deepEqual(answers, ['HTTP/1.1 401'], exchange);
  } finally {
    await server.close();
  }
});

/** The app of this file listening on a free loopback port (inject never reaches Node's parser). */
async function withListening(config: Partial<TestApp['config']> = {}, logger: AppOptions['logger'] = false) {
  const app = await buildApp({ ...t.runtime, config: { ...t.runtime.config, ...config } }, { logger });
  await app.listen({ port: 0, host: '127.0.0.1' });
  const { port } = app.server.address() as AddressInfo;
  return { port, close: () => app.close() };
}

function rawExchange(server: { port: number }, request: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(server.port, '127.0.0.1', () => socket.write(request));
    let received = '';
    socket.setEncoding('utf8');
    socket.on('data', (chunk) => { received += chunk; });
    socket.on('close', () => resolve(received));
    socket.on('error', reject);
    socket.setTimeout(5000, () => socket.destroy(new Error('no answer in 5 s')));
  });
}

function assertRawProblem(response: string, status: number, code: string): void {
  const [head, body] = response.split('\r\n\r\n');
  assert.match(head!, new RegExp(`^HTTP/1\\.1 ${status} `), response);
  assert.match(head!, /\r\ncontent-type: application\/problem\+json; charset=utf-8\r\n/i);
  const requestId = /\r\nx-request-id: ([^\r]+)/i.exec(head!)?.[1];
  const problem = JSON.parse(body!);
  assert.equal(problem.status, status);
  assert.equal(problem.code, code);
  assert.equal(problem.request_id, requestId);
  for (const field of ['type', 'title', 'detail']) assert.equal(typeof problem[field], 'string', field);
}

test('415 unsupported_media_type for a body that is not JSON by its content type', async () => {
  assertProblem(await postAgents({ 'content-type': 'text/plain' }, 'agent_name=x'), 415, 'unsupported_media_type');
  assertProblem(await postAgents({ 'content-type': 'application/xml' }, '<agent/>'), 415, 'unsupported_media_type');
  assertProblem(await postAgents({ 'content-type': 'application/x-www-form-urlencoded' }, 'agent_name=x'), 415, 'unsupported_media_type');
});

test('404 not_found for an unknown route, with or without a key', async () => {
  for (const url of [`${API}/nope`, `${API}/agents/extra/segments`, '/api/v2/whatever', '/nope']) {
    assertProblem(await t.inject({ method: 'GET', url }), 404, 'not_found');
    assertProblem(await t.inject({ method: 'GET', url, headers: u.auth }), 404, 'not_found');
  }
  // An API URL is not a page: none of the web app's headers or cookies, even when a browser asks.
  for (const url of [`${API}/nope`, '/api/v2/whatever']) {
    const res = await t.inject({ method: 'GET', url, headers: { accept: 'text/html' } });
    assertProblem(res, 404, 'not_found');
    assert.equal(res.headers['set-cookie'], undefined, url);
    assert.equal(res.headers['content-security-policy'], undefined, url);
  }
  assertProblem(await t.inject({ method: 'DELETE', url: `${API}/agents`, headers: u.auth }), 404, 'not_found');
});

test('checks run in order: route, then auth, then rate limit, then body, then objects', async () => {
  const limited = await t.user({ rateLimit: 1 });
  await t.inject({ method: 'GET', url: `${API}/agents`, headers: limited.auth });
  const badJson = { 'content-type': 'application/json' };
  // An unknown route wins over a missing key and over a bad body.
  assertProblem(await t.inject({ method: 'POST', url: `${API}/nope`, headers: badJson, payload: '{' }), 404, 'not_found');
  assertProblem(await t.inject({ method: 'POST', url: `${API}/nope`, headers: { 'content-type': 'text/plain' }, payload: 'x' }), 404, 'not_found');
  const tooBig = 'x'.repeat(1024 * 1024 + 1);
  assertProblem(await t.inject({ method: 'POST', url: `${API}/nope`, headers: badJson, payload: tooBig }), 404, 'not_found');
  // A missing key wins over a bad body and an unknown workspace.
  assertProblem(await t.inject({ method: 'POST', url: `${API}/agents`, headers: badJson, payload: '{' }), 401, 'unauthorized');
  assertProblem(await t.inject({ method: 'POST', url: `${API}/agents`, headers: { 'content-type': 'text/plain' }, payload: 'x' }), 401, 'unauthorized');
  // A spent quota wins over a bad body.
  assertProblem(await t.inject({ method: 'POST', url: `${API}/agents`, headers: { ...limited.auth, ...badJson }, payload: '{' }), 429, 'rate_limited');
  // A bad body wins over an unknown workspace.
  assertProblem(await postAgents(badJson, '{"agent_name":"x","workspace_id":"wsp_nope000000000000000000"'), 400, 'malformed_json');
  assertProblem(await postAgents(badJson, '{"agent_name":"","workspace_id":"wsp_nope000000000000000000"}'), 422, 'validation_failed');
  // Only then the objects.
  assertProblem(await postAgents(badJson, '{"agent_name":"x","workspace_id":"wsp_nope000000000000000000"}'), 404, 'workspace_not_found');
});

test('an unexpected failure is a 500 problem with no stack trace or SQL', async () => {
  await withTestApp(async (broken) => {
    const user = await broken.user();
    await sql`drop table memberships`.execute(broken.runtime.store.db);
    const res = await broken.inject({ method: 'GET', url: `${API}/agents`, headers: user.auth });
    assert.equal(res.statusCode, 500);
    assert.equal(res.headers['content-type'], 'application/problem+json; charset=utf-8');
    assert.equal(res.json().code, 'internal_error');
    assert.doesNotMatch(res.body, /agents|memberships|select|\bat .+:\d+|node_modules|sqlite|postgres|relation/i);
  });
});

test('a URL that cannot be decoded is a 404 problem, not Fastify\'s own JSON', async () => {
  for (const headers of [{}, u.auth]) {
    const res = await t.inject({ method: 'GET', url: `${API}/sessions/%E0%A4%A/messages`, headers });
    assertProblem(res, 404, 'not_found');
  }
});

test('a long path id reaches auth and then the object check, like any unknown id', async () => {
  const server = await withListening();
  try {
    // As long as Node lets the request line be (its header limit, 16 KiB by default).
    for (const longId of [`ses_${'x'.repeat(500)}`, `ses_${'x'.repeat(1001)}`, `ses_${'x'.repeat(16_000)}`]) {
      const url = `${API}/sessions/${longId}/messages`;
      assertProblem(await t.inject({ method: 'GET', url }), 401, 'unauthorized');
      assertProblem(await t.inject({ method: 'GET', url, headers: u.auth }), 404, 'session_not_found');
      const overHttp = await fetch(`http://127.0.0.1:${server.port}${url}`, { headers: u.auth });
      assert.equal(overHttp.status, 404);
      assert.equal(((await overHttp.json()) as { code: string }).code, 'session_not_found');
    }
  } finally {
    await server.close();
  }
});

test('a NUL character in a query string is a 422 naming the field, never a 500 (PostgreSQL refuses NUL)', async () => {
  for (const url of [`${API}/actions?session_id=%00`, `${API}/actions?session_id=ses_%00`, `${API}/questions?session_id=a%00b`,
    `${API}/actions?after=op_%00`, `${API}/questions?after=%00`,
    `${API}/sessions/ses_abc/messages?after=%00`, `${API}/sessions/ses_abc/messages?limit=1&after=a%00b`]) {
    const body = assertProblem(await t.inject({ method: 'GET', url, headers: u.auth }), 422, 'validation_failed');
    assert.match(JSON.stringify(body.errors), /"path":"(session_id|after)"/, url);
    assert.match(String(body.detail), /NUL character|surrogate/, url);
  }
  const inPath = await t.inject({ method: 'GET', url: `${API}/sessions/ses_%00/messages`, headers: u.auth });
  assert.match(JSON.stringify(assertProblem(inPath, 422, 'validation_failed').errors), /"path":"session_id"/);
  // A parameter no route reads is ignored, NUL or not, like any other unknown one.
  for (const url of [`${API}/questions?x=a%00b`, `${API}/agents?x=%00`, `${API}/actions?x=%00`]) {
    assert.equal((await t.inject({ method: 'GET', url, headers: u.auth })).statusCode, 200, url);
  }
  const unread = await t.inject({ method: 'GET', url: `${API}/sessions/ses_abc/messages?x=a%00b`, headers: u.auth });
  assertProblem(unread, 404, 'session_not_found');
});

test('the docs\' static files answer a path outside their folder, a failed precondition and an unmet range with a 4xx problem, never a 500', async () => {
  assertProblem(await t.inject({ method: 'GET', url: '/docs/static/../../package.json' }), 404, 'not_found');
  assertProblem(await t.inject({ method: 'GET', url: '/docs/static/index.css', headers: { 'if-match': '"nope"' } }), 412, 'precondition_failed');
  assertProblem(await t.inject({ method: 'GET', url: '/docs/static/index.css', headers: { range: 'bytes=999999999-' } }), 416, 'range_not_satisfiable');
  const whole = await t.inject({ method: 'GET', url: '/docs/static/index.css' });
  assert.equal(whole.statusCode, 200);
  // The explorer's files may not be framed by another site either (clickjacking), the page included.
  for (const url of ['/docs/static/index.css', '/docs/static/index.html', '/docs/static/swagger-initializer.js']) {
    const res = await t.inject({ method: 'GET', url });
    assert.equal(res.headers['x-frame-options'], 'DENY', url);
    assert.equal(res.headers['content-security-policy'], "frame-ancestors 'none'", url);
  }
});

test('a body the client stops sending part-way (then hangs up) is a client\'s mistake: no error logged, nor taken for the database\'s trouble', async () => {
  const lines: string[] = [];
  const server = await withListening({}, { level: 'info', stream: { write: (line: string) => { lines.push(line); } } });
  try {
    for (const requestLine of [`GET ${API}/agents`, `POST ${API}/messages`]) {
      await new Promise<void>((resolve, reject) => {
        const socket = connect(server.port, '127.0.0.1', () => {
          socket.write(`${requestLine} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${u.key}\r\n`
            + 'Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{"a":');
          setTimeout(() => socket.resetAndDestroy(), 100);
        });
        socket.on('close', () => resolve());
        socket.on('error', reject);
      });
    }
    // A whole request after it, so that the hang-up has been dealt with by the time its line is in.
    const next = await rawExchange(server, 'GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n');
    assert.match(next, /^HTTP\/1\.1 200 /);
    const logged = lines.map((line) => JSON.parse(line) as { level: number; msg: string });
    assert.ok(logged.some((line) => line.msg === 'request'));
    assert.deepEqual(logged.filter((line) => line.level >= 40).map((line) => line.msg), []);
  } finally {
    await server.close();
  }
});
