import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { Webhook } from 'standardwebhooks';
import { runCli } from '../../testing/cli.ts';
import { databaseEnv, freshDatabase, type TestDatabase } from '../../testing/harness.ts';

/** `agent-channel webhooks create|list|delete` (contract §9.5), run as the operator runs them. */
let database: TestDatabase;
let env: Record<string, string>;
before(async () => {
  database = await freshDatabase();
  env = { ...databaseEnv(database), SCRYPT_COST_LOG2: '10', WEBHOOK_ALLOW_PRIVATE_URLS: '' };
  assert.equal((await runCli(env, 'users', 'create', '--email', 'hooks@example.test', '--password', 'correct horse')).code, 0);
});
after(async () => { await database.drop(); });

async function ok(extraEnv: Record<string, string>, ...args: string[]): Promise<string> {
  const result = await runCli({ ...env, ...extraEnv }, ...args);
  assert.equal(result.code, 0, `${args.join(' ')}: ${result.stderr}`);
  return result.stdout;
}

test('create prints the endpoint id, then its secret (which standardwebhooks takes); list shows id, URL, status and events; delete removes it', async () => {
  const out = await ok({}, 'webhooks', 'create', '--email', 'hooks@example.test', '--url', 'https://8.8.8.8/hooks', '--events', 'turn.completed,action.pending');
  const [id, secret, rest] = out.split('\n');
  assert.match(id!, /^whk_[A-Za-z0-9]+$/);
  assert.match(secret!, /^whsec_[A-Za-z0-9+/]+=*$/);
  assert.equal(rest, '');
  assert.doesNotThrow(() => new Webhook(secret!));
  const all = (await ok({}, 'webhooks', 'create', '--email', 'hooks@example.test', '--url', 'https://8.8.4.4/all')).split('\n')[0]!;
  assert.equal(await ok({}, 'webhooks', 'list', '--email', 'hooks@example.test'), [
    `${id}\thttps://8.8.8.8/hooks\tenabled\tturn.completed,action.pending`,
    `${all}\thttps://8.8.4.4/all\tenabled\tturn.completed,turn.failed,turn.cancelled,action.pending,action.settled,question.opened,question.answered,question.closed`,
    '',
  ].join('\n'));
  assert.equal(await ok({}, 'webhooks', 'delete', '--email', 'hooks@example.test', '--id', id!), '');
  assert.equal((await ok({}, 'webhooks', 'list', '--email', 'hooks@example.test')).split('\n')[0]!.split('\t')[0], all);
});

test('http:// and private addresses are refused unless the CLI\'s own environment has WEBHOOK_ALLOW_PRIVATE_URLS=true', async () => {
  for (const url of ['http://8.8.8.8/hooks', 'https://127.0.0.1/hooks', 'https://localhost/hooks']) {
    const refused = await runCli(env, 'webhooks', 'create', '--email', 'hooks@example.test', '--url', url);
    assert.equal(refused.code, 1, url);
    assert.match(refused.stderr, /^agent-channel: --url must (be an https:\/\/ URL|not point to a loopback)/, url);
    assert.equal(refused.stdout, '');
  }
  const out = await ok({ WEBHOOK_ALLOW_PRIVATE_URLS: 'true' }, 'webhooks', 'create', '--email', 'hooks@example.test', '--url', 'http://127.0.0.1:9/hooks');
  assert.match(out, /^whk_/);
});

test('delete of an endpoint that is not there says where ids are found', async () => {
  const result = await runCli(env, 'webhooks', 'delete', '--email', 'hooks@example.test', '--id', 'whk_nope');
  assert.equal(result.code, 1);
  assert.match(result.stderr, /No such webhook endpoint\. --id takes the id that `webhooks list --email E` prints/);
});
