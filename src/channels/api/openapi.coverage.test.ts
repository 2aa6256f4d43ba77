import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { API, startTestApp, type TestApp } from '../../testing/harness.ts';

/** Every route of the contract (§1–§6), its success status and the problems it can answer. */
const CONTRACT = [
  { method: 'post', path: '/messages', statuses: ['200', '202', '400', '401', '404', '409', '413', '415', '422', '429', '502'] },
  { method: 'get', path: '/agents', statuses: ['200', '401', '429'] },
  { method: 'post', path: '/agents', statuses: ['201', '400', '401', '403', '404', '413', '415', '422', '429'] },
  { method: 'get', path: '/sessions/{session_id}/messages', statuses: ['200', '401', '404', '422', '429'] },
  { method: 'get', path: '/actions', statuses: ['200', '401', '429'] },
  { method: 'post', path: '/actions/decisions', statuses: ['200', '401', '422', '429'] },
  { method: 'get', path: '/questions', statuses: ['200', '401', '429'] },
  { method: 'post', path: '/questions/answers', statuses: ['200', '401', '422', '429'] },
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

test('query parameters are documented as what they mean (limit: an integer from 1 to 200)', () => {
  const read = doc.paths[`${API}/sessions/{session_id}/messages`].get;
  const limit = read.parameters.find((p: any) => p.in === 'query' && p.name === 'limit');
  assert.deepEqual({ type: limit.schema.type, minimum: limit.schema.minimum, maximum: limit.schema.maximum }, { type: 'integer', minimum: 1, maximum: 200 });
  assert.equal(limit.schema.pattern, undefined);
});
