import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { after, before, test } from 'node:test';
import SwaggerParser from '@apidevtools/swagger-parser';
import { API, startTestApp, type TestApp } from './testing/harness.ts';
import { sample } from './testing/metrics.ts';

let t: TestApp;
before(async () => { t = await startTestApp(); });
after(async () => { await t.close(); });

test('/healthz answers without a key', async () => {
  const res = await t.inject({ method: 'GET', url: '/healthz' });
  assert.equal(res.statusCode, 200);
  assert.deepEqual(res.json(), { status: 'ok' });
});

test('/readyz answers ready when the database is reachable', async () => {
  const res = await t.inject({ method: 'GET', url: '/readyz' });
  assert.equal(res.statusCode, 200);
  assert.equal(res.json().status, 'ready');
});

test('every response carries an X-Request-Id, unique per request, echoed in problem bodies', async () => {
  const a = await t.inject({ method: 'GET', url: '/healthz' });
  const b = await t.inject({ method: 'GET', url: `${API}/agents` });
  assert.ok(a.headers['x-request-id'] && b.headers['x-request-id']);
  assert.notEqual(a.headers['x-request-id'], b.headers['x-request-id']);
  assert.equal(b.json().request_id, b.headers['x-request-id']);
});

test('a client cannot choose its own request id', async () => {
  const res = await t.inject({ method: 'GET', url: '/healthz', headers: { 'x-request-id': 'forged\nline' } });
  assert.notEqual(res.headers['x-request-id'], 'forged\nline');
});

test('/metrics counts requests by route and status and has a latency histogram', async () => {
  const u = await t.user();
  const before = (await t.inject({ method: 'GET', url: '/metrics' })).body;
  for (let i = 0; i < 3; i++) await t.inject({ method: 'GET', url: `${API}/agents`, headers: u.auth });
  await t.inject({ method: 'GET', url: `${API}/agents` });
  const res = await t.inject({ method: 'GET', url: '/metrics' });
  assert.equal(res.statusCode, 200);
  assert.match(String(res.headers['content-type']), /^text\/plain/);
  const route = { method: 'GET', route: `${API}/agents` };
  const ok = { ...route, status: '200' };
  const unauthorized = { ...route, status: '401' };
  assert.equal(sample(res.body, 'http_requests_total', ok) - sample(before, 'http_requests_total', ok), 3);
  assert.equal(sample(res.body, 'http_requests_total', unauthorized) - sample(before, 'http_requests_total', unauthorized), 1);
  assert.match(res.body, /# TYPE http_request_duration_seconds histogram/);
  assert.ok(sample(res.body, 'http_request_duration_seconds_count', route) >= 4);
  assert.match(res.body, new RegExp(`http_request_duration_seconds_bucket\\{le="0.005",method="GET",route="${API}/agents"\\}`));
});

test('/metrics names the release and the Node.js version the instance runs', async () => {
  const { version } = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string };
  const metrics = (await t.inject({ method: 'GET', url: '/metrics' })).body;
  assert.equal(sample(metrics, 'agent_channel_build_info', { version, node: process.versions.node }), 1);
});

test('/metrics labels unknown routes as one series, not one per URL', async () => {
  await t.inject({ method: 'GET', url: '/no/such/route/a1' });
  await t.inject({ method: 'GET', url: '/no/such/route/b2' });
  const metrics = (await t.inject({ method: 'GET', url: '/metrics' })).body;
  assert.ok(!metrics.includes('/no/such/route'));
});

test('/openapi.json is a valid OpenAPI document that describes the agents routes', async () => {
  const res = await t.inject({ method: 'GET', url: '/openapi.json' });
  assert.equal(res.statusCode, 200);
  const document = res.json();
  await SwaggerParser.validate(structuredClone(document));
  assert.ok(document.paths[`${API}/agents`].get);
  assert.ok(document.paths[`${API}/agents`].post);
});

test('/docs serves the API explorer with its assets from this server, with no outside URL', async () => {
  const page = await t.inject({ method: 'GET', url: '/docs/' });
  const html = page.statusCode === 302 ? await t.inject({ method: 'GET', url: String(page.headers.location) }) : page;
  assert.equal(html.statusCode, 200);
  assert.match(String(html.headers['content-type']), /text\/html/);
  assert.equal(html.headers['x-frame-options'], 'DENY');
  assert.equal(html.headers['content-security-policy'], "frame-ancestors 'none'");
  const assets = [...html.body.matchAll(/(?:src|href)="([^"]+)"/g)].map((m) => m[1]!);
  assert.ok(assets.length > 0);
  assert.ok(assets.includes('./static/swagger-initializer.js'));
  for (const asset of assets) {
    assert.doesNotMatch(asset, /^(https?:)?\/\//, `asset ${asset} is served from elsewhere`);
    const res = await t.inject({ method: 'GET', url: new URL(asset, 'http://local/docs/').pathname });
    assert.equal(res.statusCode, 200, asset);
    // No script or page of the explorer reaches out to another host.
    if (/\.(html|js)$/.test(asset) && !asset.includes('bundle') && !asset.includes('preset')) {
      assert.doesNotMatch(res.body, /["'`]https?:\/\/(?!localhost|127\.0\.0\.1)[^"'`]*["'`]/, `${asset} names an outside URL`);
    }
  }
});
