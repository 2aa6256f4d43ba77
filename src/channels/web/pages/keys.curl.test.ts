import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { after, before, test } from 'node:test';
import { promisify } from 'node:util';
import { listeningUrl, startTestApp, type TestApp } from '../../../testing/harness.ts';
import { WebClient } from '../../../testing/web-client.ts';

const run = promisify(execFile);

let t: TestApp;
let port: number;
before(async () => {
  // Behind a proxy on this machine: X-Forwarded-* is believed from loopback only.
  t = await startTestApp({ trustProxy: ['loopback'] });
  port = Number(new URL(await listeningUrl(t)).port);
});
after(async () => { await t.close(); });

/** The curl lines shown with a new key, as text (what Copy copies). */
const curlOf = (body: string) => {
  const block = /<pre class="code-block" id="new-key-curl"><code>([\s\S]*?)<\/code><\/pre>/.exec(body)?.[1];
  return block?.replaceAll('&#39;', "'").replaceAll('&quot;', '"').replaceAll('&lt;', '<').replaceAll('&gt;', '>').replaceAll('&amp;', '&');
};

async function newKeyPage(web: WebClient, headers: Record<string, string> = {}): Promise<string> {
  await web.get('/account/keys', headers);
  await web.post('/account/keys', { label: 'first key' }, headers);
  return (await web.get('/account/keys', headers)).body;
}

test('happy: the new key comes with curl lines that work as pasted, against the address the browser used', async () => {
  const web = new WebClient(t);
  await web.signup();
  await web.get('/agents');
  await web.post('/agents', { agent_name: 'Helper' });
  const lines = curlOf(await newKeyPage(web, { host: `127.0.0.1:${port}` }));
  assert.ok(lines, 'shown with the key');
  const token = /Bearer (ak_[A-Za-z0-9_]+)/.exec(lines)![1]!;
  assert.match(lines, new RegExp(`^curl -s -H 'Authorization: Bearer ${token}' http://127\\.0\\.0\\.1:${port}/api/v1/api-channel/agents\\n`));
  // Run as a person would paste them: both answer, the message with the agent's reply.
  const { stdout } = await run('sh', ['-c', lines], { timeout: 20_000 });
  const [agents, sent] = stdout.replace('}{', '}\n{').split('\n').map((line) => JSON.parse(line));
  assert.equal(agents.agents[0].name, 'Helper');
  assert.equal(sent.status, 'completed');
  assert.equal(sent.reply, 'You said: hello');
  // Shown once: gone on reload, as the key is.
  assert.equal(curlOf((await web.get('/account/keys')).body), undefined);
});

test('happy: behind a proxy that TRUST_PROXY names, its X-Forwarded-Proto and -Host; from anyone else, the Host', async () => {
  const web = new WebClient(t, { ip: '127.0.0.1' });
  await web.signup();
  const proxied = curlOf(await newKeyPage(web, { host: 'internal:8080', 'x-forwarded-proto': 'https', 'x-forwarded-host': 'agents.example.com' }))!;
  assert.match(proxied, /https:\/\/agents\.example\.com\/api\/v1\/api-channel\/agents/);
  assert.match(proxied, /Create an agent|-d '\{"text":"hello"\}'/);
  const direct = new WebClient(t, { ip: '192.0.2.7' });
  await direct.signup();
  const notBelieved = curlOf(await newKeyPage(direct, { host: 'agents.example.org', 'x-forwarded-proto': 'https', 'x-forwarded-host': 'evil.example' }))!;
  assert.match(notBelieved, /http:\/\/agents\.example\.org\/api\/v1\/api-channel\/messages/);
  assert.doesNotMatch(notBelieved, /evil/);
});

test('happy: PUBLIC_URL, when set, is the address; with several agents the message names the first', async () => {
  const withPublicUrl = await startTestApp({ publicUrl: 'https://agents.example.com/base' });
  try {
    const web = new WebClient(withPublicUrl);
    const email = await web.signup();
    const user = (await withPublicUrl.runtime.services.accounts.findByEmail(email))!;
    await withPublicUrl.runtime.services.accounts.setPlan(email, 'pro');
    const first = await withPublicUrl.runtime.services.agents.create(user.id, { agent_name: 'First' });
    await withPublicUrl.runtime.services.agents.create(user.id, { agent_name: 'Second' });
    const lines = curlOf(await newKeyPage(web, { host: 'ignored.example' }))!;
    assert.match(lines, /https:\/\/agents\.example\.com\/base\/api\/v1\/api-channel\/agents/);
    assert.doesNotMatch(lines, /ignored/);
    assert.match(lines, new RegExp(`-d '\\{"agent_id":"${first.agent_id}","text":"hello"\\}'`));
  } finally {
    await withPublicUrl.close();
  }
});
