import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { judgeByType } from '../../brains/questions.ts';
import { ID_PREFIXES, looksLikeId, type IdKind } from '../../domain/ids.ts';
import { API, startTestApp, type TestApp } from '../../testing/harness.ts';
import { HEADERS } from './openapi.ts';

/** Every route of the contract (§1–§6, §9), its success status and the problems it can answer. */
const CONTRACT = [
  { method: 'post', path: '/messages', statuses: ['200', '202', '400', '401', '404', '409', '413', '415', '422', '429', '502'] },
  { method: 'get', path: '/agents', statuses: ['200', '401', '429'] },
  { method: 'post', path: '/agents', statuses: ['201', '400', '401', '403', '404', '413', '415', '422', '429'] },
  { method: 'get', path: '/sessions/{session_id}/messages', statuses: ['200', '401', '404', '422', '429'] },
  { method: 'get', path: '/actions', statuses: ['200', '401', '429'] },
  { method: 'post', path: '/actions/decisions', statuses: ['200', '401', '422', '429'] },
  { method: 'get', path: '/questions', statuses: ['200', '401', '429'] },
  { method: 'post', path: '/questions/answers', statuses: ['200', '401', '422', '429'] },
  { method: 'get', path: '/events', statuses: ['200', '401', '404', '410', '422', '429'] },
  { method: 'post', path: '/sessions/{session_id}/cancel', statuses: ['200', '401', '404', '429'] },
];

let t: TestApp;
let doc: any;
before(async () => {
  t = await startTestApp();
  doc = (await t.inject({ method: 'GET', url: '/openapi.json' })).json();
});
after(async () => { await t.close(); });

test('the OpenAPI document covers every route of the contract with its statuses', () => {
  for (const route of CONTRACT) {
    const operation = doc.paths[`${API}${route.path}`]?.[route.method];
    assert.ok(operation, `${route.method.toUpperCase()} ${route.path} is documented`);
    assert.ok(operation.operationId, `${route.path} has an operationId`);
    for (const status of route.statuses) {
      assert.ok(operation.responses[status], `${route.method.toUpperCase()} ${route.path} documents ${status}`);
    }
  }
});

test('every documented route is a contract route (nothing undocumented, nothing extra, no web pages)', () => {
  assert.deepEqual(Object.keys(doc.paths).filter((path) => !path.startsWith(API)), []);
  const documented = Object.entries(doc.paths)
    .filter(([path]) => path.startsWith(API))
    .flatMap(([path, operations]) => Object.keys(operations as object).map((method) => `${method} ${path.slice(API.length)}`));
  assert.deepEqual(documented.sort(), CONTRACT.map((r) => `${r.method} ${r.path}`).sort());
});

test('the bearer scheme applies to the API and problem bodies are described', () => {
  assert.equal(doc.components.securitySchemes.bearerAuth.scheme, 'bearer');
  assert.deepEqual(doc.security, [{ bearerAuth: [] }]);
  const sendProblem = doc.paths[`${API}/messages`].post.responses['502'];
  assert.ok(JSON.stringify(sendProblem).includes('Problem'));
  const send = doc.paths[`${API}/messages`].post;
  const headerNames = send.parameters.filter((p: any) => p.in === 'header').map((p: any) => p.name.toLowerCase());
  assert.ok(headerNames.includes('idempotency-key') && headerNames.includes('prefer'));
});

test('every error response is documented as application/problem+json with the Problem schema, as the server sends it', async () => {
  let errors = 0;
  for (const [path, operations] of Object.entries<any>(doc.paths)) {
    for (const [method, operation] of Object.entries<any>(operations)) {
      for (const [status, response] of Object.entries<any>(operation.responses)) {
        if (Number(status) < 400) continue;
        errors++;
        assert.deepEqual(Object.keys(response.content ?? {}), ['application/problem+json'], `${method} ${path} ${status}`);
        assert.equal(response.content['application/problem+json'].schema.$ref, '#/components/schemas/Problem', `${method} ${path} ${status}`);
      }
    }
  }
  assert.ok(errors > 40, 'every route documents its problems');
  const res = await t.inject({ method: 'GET', url: `${API}/agents` });
  assert.equal(res.statusCode, 401);
  assert.match(String(res.headers['content-type']), /^application\/problem\+json/);
});

test('the response headers the server sends are the ones the document names, status by status', async () => {
  const user = await t.userWithAgent({ rateLimit: 2 });
  const named = Object.keys(HEADERS).map((name) => name.toLowerCase());
  const check = (res: { statusCode: number; headers: Record<string, unknown> }, method: string, path: string) => {
    const documented = Object.keys(doc.paths[`${API}${path}`][method].responses[res.statusCode].headers).map((name) => name.toLowerCase());
    const sent = named.filter((name) => res.headers[name] !== undefined);
    assert.deepEqual(sent.sort(), documented.sort(), `${method} ${path} ${res.statusCode}`);
  };
  const sleepy = await t.inject({
    method: 'POST', url: `${API}/messages`, headers: { ...user.auth, prefer: 'wait=0' }, payload: { text: '!sleep 300 later', agent_id: user.agentId },
  });
  assert.equal(sleepy.statusCode, 202);
  check(sleepy, 'post', '/messages');
  const listed = await t.inject({ method: 'GET', url: `${API}/agents`, headers: user.auth });
  assert.equal(listed.statusCode, 200);
  check(listed, 'get', '/agents');
  const limited = await t.inject({ method: 'GET', url: `${API}/agents`, headers: user.auth });
  assert.equal(limited.statusCode, 429);
  check(limited, 'get', '/agents');
  const refused = await t.inject({ method: 'GET', url: `${API}/agents` });
  assert.equal(refused.statusCode, 401);
  check(refused, 'get', '/agents');
});

test('every operation documents the 500 a fault of ours gives; a 422 only where something is read to be judged', () => {
  for (const [path, operations] of Object.entries<any>(doc.paths)) {
    for (const [method, operation] of Object.entries<any>(operations)) {
      assert.ok(operation.responses['500'], `${method} ${path} documents 500`);
      const readsInput = method !== 'get' || (operation.parameters ?? []).length > 0;
      assert.equal(Boolean(operation.responses['422']), readsInput, `${method} ${path}: 422 documented only if it reads a body, query or path`);
    }
  }
});

test('every success response says what it is, and the send example works as it stands (the docs page fills it in)', () => {
  for (const [path, operations] of Object.entries<any>(doc.paths)) {
    for (const [method, operation] of Object.entries<any>(operations)) {
      for (const [status, response] of Object.entries<any>(operation.responses)) {
        if (Number(status) < 300) assert.ok(response.description && response.description !== 'Default Response', `${method} ${path} ${status}`);
      }
    }
  }
  const body = doc.paths[`${API}/messages`].post.requestBody.content['application/json'].schema;
  assert.deepEqual(Object.keys(body.example), ['text'], 'no placeholder session_id or agent_id to send back as a 404');
  assert.match(doc.components.securitySchemes.bearerAuth.description, /`ak_<keyId>_<secret>`/, 'in a code span: markdown would drop a bare <keyId>');
});

test('the bounds the server enforces are in the document: text length, the format of after', () => {
  const text = doc.paths[`${API}/messages`].post.requestBody.content['application/json'].schema.properties.text;
  assert.deepEqual({ minLength: text.minLength, maxLength: text.maxLength }, { minLength: 1, maxLength: 32_000 });
  const read = doc.paths[`${API}/sessions/{session_id}/messages`].get;
  const afterParameter = read.parameters.find((p: any) => p.in === 'query' && p.name === 'after');
  const pattern = new RegExp(afterParameter.schema.pattern);
  assert.ok(pattern.test(afterParameter.schema.example));
  for (const wrong of ['2026-11-22T12:34:56Z', '2026-11-22T12:34:56.789012+00:00', '2026-11-22T12:34:56.7890123Z']) assert.ok(!pattern.test(wrong), wrong);
});

test('the questions\' examples tell one story: the example answer fits the example answer_type, and the example refusal is that type\'s', () => {
  const type = doc.components.schemas.OpenQuestion.properties.answer_type.example;
  const answer = doc.paths[`${API}/questions/answers`].post.requestBody.content['application/json'].schema.anyOf[0].items.properties.text.example;
  const refusal = doc.components.schemas.AnswerResult.anyOf[0].properties.reason.example;
  assert.deepEqual(judgeByType(type, answer), { accepted: true }, `"${answer}" answers a ${type} question`);
  assert.equal(judgeByType(type, 'not at all the kind').reason, refusal, `the example refusal is what a ${type} question says`);
});

test('every component schema is one the document refers to', () => {
  const text = JSON.stringify(doc);
  const unreferenced = Object.keys(doc.components.schemas).filter((name) => !text.includes(`"#/components/schemas/${name}"`));
  assert.deepEqual(unreferenced, []);
  assert.ok(doc.components.schemas.Problem && doc.components.schemas.Agent);
});

test('a route\'s 422 names the codes it can carry, and the problems of Node\'s parser (408, 431) are documented', () => {
  const send = doc.paths[`${API}/messages`].post.responses;
  for (const code of ['text_empty', 'text_too_long', 'agent_required', 'idempotency_key_reused', 'validation_failed']) {
    assert.match(send['422'].description, new RegExp(`\\b${code}\\b`), code);
  }
  for (const status of ['408', '431']) assert.ok(send[status], status);
});

test('every response object is open to fields it does not name (contract §0: extra response fields are allowed)', () => {
  const closed: string[] = [];
  const walk = (node: unknown, where: string) => {
    if (!node || typeof node !== 'object') return;
    if ((node as { additionalProperties?: unknown }).additionalProperties === false) closed.push(where);
    for (const [key, value] of Object.entries(node)) walk(value, `${where}/${key}`);
  };
  walk(doc, '');
  assert.deepEqual(closed, []);
  assert.ok(doc.components.schemas.SendResult.properties.reply, 'the schemas themselves are intact');
});

test('every route that reads a query string documents the 422 of a parameter given more than once', () => {
  for (const [path, operations] of Object.entries<any>(doc.paths)) {
    for (const [method, operation] of Object.entries<any>(operations)) {
      if (!(operation.parameters ?? []).some((p: any) => p.in === 'query')) continue;
      assert.match(operation.responses['422'].description, /given more than once/, `${method} ${path}`);
    }
  }
});

test('every parameter, path ones included, says what it is', () => {
  for (const [path, operations] of Object.entries<any>(doc.paths)) {
    for (const [method, operation] of Object.entries<any>(operations)) {
      for (const parameter of operation.parameters ?? []) assert.ok(parameter.description, `${method} ${path}: ${parameter.in} ${parameter.name}`);
    }
  }
});

test('a question\'s session_id says that a question put to you on another\'s mission names a session you cannot read', () => {
  assert.match(doc.components.schemas.OpenQuestion.properties.session_id.description, /404 session_not_found/);
});

test('query parameters are documented as what they mean (limit: an integer from 1 to 200)', () => {
  const read = doc.paths[`${API}/sessions/{session_id}/messages`].get;
  const limit = read.parameters.find((p: any) => p.in === 'query' && p.name === 'limit');
  assert.deepEqual({ type: limit.schema.type, minimum: limit.schema.minimum, maximum: limit.schema.maximum, default: limit.schema.default },
    { type: 'integer', minimum: 1, maximum: 200, default: 50 });
  assert.equal(limit.schema.pattern, undefined);
});

/** What kind of id a property (or parameter) named `<name>` holds, by the contract's names. */
const ID_KIND_OF: Record<string, IdKind> = {
  agent_id: 'agent', workspace_id: 'workspace', session_id: 'session', operation_id: 'action',
  request_id: 'question', mission_id: 'mission', user_id: 'user',
};

/** Every example given for a property or parameter whose name ends in `_id`, anywhere in `node`. */
function idExamples(node: unknown, where = '', found: { where: string; name: string; value: unknown }[] = []) {
  if (Array.isArray(node)) {
    node.forEach((item, i) => idExamples(item, `${where}[${i}]`, found));
  } else if (node && typeof node === 'object') {
    const examplesOf = (schema: any) => [
      ...(schema && typeof schema === 'object' && 'example' in schema ? [schema.example] : []),
      ...(Array.isArray(schema?.examples) ? schema.examples : []),
    ];
    const record = node as Record<string, any>;
    if (record.properties && typeof record.properties === 'object') {
      for (const [name, schema] of Object.entries(record.properties)) {
        if (name.endsWith('_id')) for (const value of examplesOf(schema)) found.push({ where: `${where}.properties.${name}`, name, value });
      }
    }
    if (typeof record.in === 'string' && typeof record.name === 'string' && record.name.endsWith('_id')) {
      for (const value of [...examplesOf(record), ...examplesOf(record.schema)]) found.push({ where, name: record.name, value });
    }
    for (const [key, value] of Object.entries(record)) idExamples(value, `${where}.${key}`, found);
  }
  return found;
}

/** Why an example id is not one newId could have made for its property's kind, or null. */
function badExampleId(name: string, value: unknown): string | null {
  const kind = ID_KIND_OF[name];
  if (!kind) return `no id kind known for ${name}: add it to ID_KIND_OF`;
  if (typeof value !== 'string') return `${JSON.stringify(value)} is not a string`;
  if (!looksLikeId(kind, value)) return `${value} does not look like a ${kind} id`;
  // newId's shape: the kind's prefix, 8 base62 characters of time and 22 random ones.
  if (!new RegExp(`^${ID_PREFIXES[kind]}[0-9A-Za-z]{30}$`).test(value)) return `${value} is not ${ID_PREFIXES[kind]} + 30 base62 characters`;
  return null;
}

test('every example id in the document is an id of its kind, in the format newId makes', () => {
  const examples = idExamples(doc);
  const names = new Set(examples.map((e) => e.name));
  for (const name of ['agent_id', 'workspace_id', 'operation_id', 'request_id']) assert.ok(names.has(name), `an example ${name} is checked`);
  for (const { where, name, value } of examples) assert.equal(badExampleId(name, value), null, where);
});

test('the example id check refuses malformed ids', () => {
  const good = 'op_0VboFtAFBFGWZQD0TrNfT45Uwgwj7W';
  assert.equal(badExampleId('operation_id', good), null);
  for (const [name, value] of [
    ['operation_id', 'op_0VboFtAF…'], // hand-shortened
    ['operation_id', good.slice(0, -1)], // one character short
    ['operation_id', `${good}X`], // one too many
    ['request_id', good], // another kind's prefix
    ['operation_id', 'op_0VboFtAFBFGWZQD0TrNfT45Uwgwj-W'], // not base62
    ['operation_id', 42],
    ['thing_id', good], // a kind nobody knows
  ] as const) {
    assert.notEqual(badExampleId(name, value), null, `${name}: ${String(value)}`);
  }
  const malformed = { components: { schemas: { X: { properties: { agent_id: { type: 'string', example: 'agt_123' } } } } } };
  const found = idExamples(malformed);
  assert.deepEqual(found.map((e) => e.value), ['agt_123']);
  assert.notEqual(badExampleId(found[0]!.name, found[0]!.value), null);
});
