import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { PROBLEMS, type ProblemCode } from '../../domain/problems.ts';
import { API, startTestApp, type TestApp } from '../../testing/harness.ts';

let t: TestApp;
let doc: any;
before(async () => {
  t = await startTestApp();
  doc = (await t.inject({ method: 'GET', url: '/openapi.json' })).json();
});
after(async () => { await t.close(); });

const operations = () => Object.entries(doc.paths as Record<string, Record<string, any>>)
  .flatMap(([path, methods]) => Object.entries(methods).map(([method, operation]) => ({ path, method, operation })));

test('every response body of the document has an example; a problem\'s carries its status and a code of that status', () => {
  let problems = 0;
  for (const { path, method, operation } of operations()) {
    for (const [status, response] of Object.entries(operation.responses as Record<string, any>)) {
      for (const [type, media] of Object.entries(response.content ?? {}) as [string, any][]) {
        const where = `${method.toUpperCase()} ${path} ${status} ${type}`;
        assert.ok(media.example !== undefined, `${where} has an example`);
        if (type !== 'application/problem+json') continue;
        problems += 1;
        const { code, status: exampleStatus, type: problemType, title } = media.example;
        assert.equal(exampleStatus, Number(status), where);
        assert.equal(PROBLEMS[code as ProblemCode]?.status, Number(status), `${where}: ${code} is a code of ${status}`);
        assert.equal(problemType, `urn:agent-channel:problem:${code}`);
        assert.equal(title, PROBLEMS[code as ProblemCode].title);
      }
    }
  }
  assert.ok(problems > 100, `${problems} problem examples`);
  assert.ok(!JSON.stringify(doc).includes('9007199254740991'), 'no made-up integer bounds');
});

test('the examples say what the server says: 202 processing, and each route\'s own problem', () => {
  const responses = doc.paths[`${API}/messages`].post.responses;
  assert.equal(responses['202'].content['application/json'].example.status, 'processing');
  assert.equal(responses['200'].content['application/json'].example.status, 'completed');
  const problemOf = (path: string, method: string, status: string) => doc.paths[`${API}${path}`][method].responses[status].content['application/problem+json'].example;
  assert.equal(problemOf('/messages', 'post', '404').code, 'session_not_found');
  assert.equal(problemOf('/messages', 'post', '422').code, 'text_empty');
  assert.equal(problemOf('/messages', 'post', '502').code, 'agent_failed');
  assert.equal(problemOf('/agents', 'post', '403').code, 'forbidden');
  assert.equal(problemOf('/agents', 'post', '422').code, 'validation_failed');
  assert.equal(problemOf('/events', 'get', '410').code, 'cursor_expired');
  assert.equal(problemOf('/agents', 'get', '401').code, 'unauthorized');
});

test('the example of a 401 is the body the server sends but for its request id', async () => {
  const res = await t.inject({ method: 'GET', url: `${API}/agents` });
  const example = doc.paths[`${API}/agents`].get.responses['401'].content['application/problem+json'].example;
  assert.deepEqual({ ...res.json() as object, request_id: undefined }, { ...example, request_id: undefined });
});

test('the document says where it is, how to follow a long turn, and what the built-in agent does', () => {
  const { title, description } = doc.info;
  assert.equal(title, 'agent-channel API');
  assert.match(description, /\[\/openapi\.json\]\(\/openapi\.json\)/);
  assert.match(description, /202 `processing`/);
  assert.match(description, /`GET \{Location\}\?after=\{message_ts\}` with `Prefer: wait=25`/);
  for (const directive of ['!sleep', '!fail', '!action', '!ask ', '!ask-user']) assert.ok(description.includes(`\`${directive}`), directive);
});

test('/docs is titled for the product', async () => {
  const page = await t.inject({ method: 'GET', url: '/docs/' });
  assert.equal(page.statusCode, 200);
  assert.match(page.body, /<title>agent-channel API reference<\/title>/);
  assert.doesNotMatch(page.body, /Swagger UI<\/title>/);
});
