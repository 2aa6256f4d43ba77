import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { after, before, test } from 'node:test';
import { hashSecret, parseApiKey } from '../domain/api-key.ts';
import { runCli } from '../testing/cli.ts';
import { USER_COMMANDS } from '../../packages/client/src/cli/usage.ts';
import { API, databaseEnv, freshDatabase, withTestApp, type TestDatabase } from '../testing/harness.ts';
import { openStore, type Store } from '../store/store.ts';
import { verifyPassword } from '../domain/password.ts';
import { LoginThrottle } from '../services/login-throttle.ts';
import { WebSessionsService } from '../services/web-sessions.ts';

let database: TestDatabase;
let env: Record<string, string>;
let store: Store;
before(async () => {
  database = await freshDatabase();
  env = { ...databaseEnv(database), SCRYPT_COST_LOG2: '10' };
  store = await openStore(env.DATABASE_URL!);
});
after(async () => { await store.close(); await database.drop(); });

/** Runs a command that must succeed; returns its stdout. */
async function ok(...args: string[]): Promise<string> {
  const result = await runCli(env, ...args);
  assert.equal(result.code, 0, `${args.join(' ')}: ${result.stderr}`);
  assert.equal(result.stderr, '', args.join(' '));
  return result.stdout;
}

test('users create prints the user id alone, and makes a personal workspace', async () => {
  const out = await ok('users', 'create', '--email', 'Ada@Example.test', '--password', 'correct horse');
  assert.match(out, /^usr_[A-Za-z0-9]+\n$/);
  const user = await store.db.selectFrom('users').selectAll().where('id', '=', out.trim()).executeTakeFirstOrThrow();
  assert.equal(user.email, 'ada@example.test');
  assert.equal(user.plan, 'free');
  const pro = (await ok('users', 'create', '--email', 'pro@example.test', '--password', 'correct horse', '--plan', 'pro')).trim();
  assert.equal((await store.db.selectFrom('users').select('plan').where('id', '=', pro).executeTakeFirstOrThrow()).plan, 'pro');
  assert.ok(await store.db.selectFrom('workspaces').select('id').where('personal_of', '=', pro).executeTakeFirst());
});

test('agents create prints the agent id alone, in the personal workspace or the one named', async () => {
  const owner = (await ok('users', 'create', '--email', 'owner@example.test', '--password', 'correct horse', '--plan', 'pro')).trim();
  const out = await ok('agents', 'create', '--email', 'owner@example.test', '--name', 'Helper');
  assert.match(out, /^agt_[A-Za-z0-9]+\n$/);
  const personal = (await store.db.selectFrom('workspaces').select('id').where('personal_of', '=', owner).executeTakeFirstOrThrow()).id;
  const agent = await store.db.selectFrom('agents').selectAll().where('id', '=', out.trim()).executeTakeFirstOrThrow();
  assert.deepEqual([agent.name, agent.workspace_id], ['Helper', personal]);

  await ok('users', 'create', '--email', 'admin@example.test', '--password', 'correct horse', '--plan', 'pro');
  assert.equal(await ok('workspaces', 'add-member', '--workspace', personal, '--email', 'admin@example.test', '--role', 'admin'), '');
  const byAdmin = (await ok('agents', 'create', '--email', 'admin@example.test', '--name', 'Shared', '--workspace', personal)).trim();
  assert.equal((await store.db.selectFrom('agents').select('workspace_id').where('id', '=', byAdmin).executeTakeFirstOrThrow()).workspace_id, personal);
});

test('users set-plan moves an account to another plan: the plan limit follows, agents already made stay', async () => {
  await ok('users', 'create', '--email', 'grows@example.test', '--password', 'correct horse');
  await ok('agents', 'create', '--email', 'grows@example.test', '--name', 'First');
  const refused = await runCli(env, 'agents', 'create', '--email', 'grows@example.test', '--name', 'Second');
  assert.notEqual(refused.code, 0, 'the free plan allows one agent');
  assert.equal(await ok('users', 'set-plan', '--email', 'grows@example.test', '--plan', 'pro'), '');
  await ok('agents', 'create', '--email', 'grows@example.test', '--name', 'Second');
  assert.equal(await ok('users', 'set-plan', '--email', 'Grows@Example.test', '--plan', 'free'), '');
  const user = await store.db.selectFrom('users').select(['id', 'plan']).where('email', '=', 'grows@example.test').executeTakeFirstOrThrow();
  assert.equal(user.plan, 'free');
  assert.equal((await store.db.selectFrom('agents').select('id').where('created_by', '=', user.id).execute()).length, 2);
  assert.notEqual((await runCli(env, 'agents', 'create', '--email', 'grows@example.test', '--name', 'Third')).code, 0);
  const badPlan = await runCli(env, 'users', 'set-plan', '--email', 'grows@example.test', '--plan', 'gold');
  assert.match(badPlan.stderr, /--plan must be free or pro/);
  assert.notEqual((await runCli(env, 'users', 'set-plan', '--email', 'nobody@example.test', '--plan', 'pro')).code, 0);
});

test('users set-password replaces a forgotten password: the new one logs in, the old one and its web sessions are done, failed log-ins forgotten', async () => {
  const id = (await ok('users', 'create', '--email', 'forgot@example.test', '--password', 'the old password')).trim();
  const sessions = new WebSessionsService({ store, idleMinutes: 60 });
  const { token } = await sessions.create(id);
  assert.ok(await sessions.resolve(token));
  const throttle = new LoginThrottle(store);
  for (let i = 0; i < 5; i += 1) await throttle.beginLogin('forgot@example.test', '192.0.2.7'); // locked out
  assert.ok('retryAfter' in await throttle.beginLogin('forgot@example.test', '192.0.2.7'));

  assert.equal(await ok('users', 'set-password', '--email', 'Forgot@Example.test', '--password', 'the new password'), '');
  const { password_hash: hash } = await store.db.selectFrom('users').select('password_hash').where('id', '=', id).executeTakeFirstOrThrow();
  assert.equal(await verifyPassword('the new password', hash), true);
  assert.equal(await verifyPassword('the old password', hash), false);
  assert.equal(await sessions.resolve(token), null, 'a session logged in with the old password ends');
  assert.ok('attempt' in await throttle.beginLogin('forgot@example.test', '192.0.2.7'), 'the account may log in at once');

  const short = await runCli(env, 'users', 'set-password', '--email', 'forgot@example.test', '--password', 'Sh0rt!');
  assert.equal(short.code, 1);
  assert.match(short.stderr, /^agent-channel: --password must be at least 8 characters\n$/);
  assert.doesNotMatch(short.stderr, /Sh0rt/, 'the password is not echoed');
  const nobody = await runCli(env, 'users', 'set-password', '--email', 'nobody@example.test', '--password', 'the new password');
  assert.equal(nobody.code, 1);
  assert.match(nobody.stderr, /No user with email nobody@example\.test/);
  assert.equal((await runCli(env, 'users', 'set-password', '--email', 'forgot@example.test')).code, 2, '--password is required');
});

test('workspaces remove-member takes a person out of a workspace while the server runs: its agents are theirs no more; the owner stays', async () => {
  await withTestApp(async (app) => {
    const cli = { ...databaseEnv(app.database), SCRYPT_COST_LOG2: '10' };
    const owner = await app.userWithAgent();
    const member = await app.user();
    const workspace = await app.runtime.services.accounts.personalWorkspaceId(owner.id);
    const agentsOf = async (user: { auth: Record<string, string> }) => (await app.inject({ url: `${API}/agents`, headers: user.auth })).json().agents as unknown[];
    assert.equal((await runCli(cli, 'workspaces', 'add-member', '--workspace', workspace, '--email', member.email, '--role', 'member')).code, 0);
    assert.equal((await agentsOf(member)).length, 1);

    const removed = await runCli(cli, 'workspaces', 'remove-member', '--workspace', workspace, '--email', member.email);
    assert.deepEqual([removed.code, removed.stdout, removed.stderr], [0, '', '']);
    assert.deepEqual(await agentsOf(member), [], 'seen by the running server at its next request');
    const sent = await app.inject({ method: 'POST', url: `${API}/messages`, headers: member.auth, payload: { text: 'hi', agent_id: owner.agentId } });
    assert.equal(sent.statusCode, 404);

    const again = await runCli(cli, 'workspaces', 'remove-member', '--workspace', workspace, '--email', member.email);
    assert.equal(again.code, 1);
    assert.match(again.stderr, /^agent-channel: \S+ is not a member of workspace wsp_\w+\.\n$/);
    const theOwner = await runCli(cli, 'workspaces', 'remove-member', '--workspace', workspace, '--email', owner.email);
    assert.equal(theOwner.code, 1);
    assert.match(theOwner.stderr, /^agent-channel: The owner of a workspace stays in it\.\n$/);
    assert.equal((await agentsOf(owner)).length, 1);
    const nowhere = await runCli(cli, 'workspaces', 'remove-member', '--workspace', 'wsp_nope', '--email', owner.email);
    assert.match(nowhere.stderr, /^agent-channel: No workspace wsp_nope\.\n$/);
  });
});

test('workspaces list prints the ids --workspace takes, personal first, with the person\'s role and the name', async () => {
  const owner = (await ok('users', 'create', '--email', 'lister@example.test', '--password', 'correct horse')).trim();
  const personal = (await store.db.selectFrom('workspaces').select('id').where('personal_of', '=', owner).executeTakeFirstOrThrow()).id;
  assert.equal(await ok('workspaces', 'list', '--email', 'lister@example.test'), `${personal}\towner\tPersonal\n`);
  // Made a member of another's workspace: listed after the personal one, with that role, named for whose it is.
  const other = (await ok('users', 'create', '--email', 'host@example.test', '--password', 'correct horse')).trim();
  const hosted = (await store.db.selectFrom('workspaces').select('id').where('personal_of', '=', other).executeTakeFirstOrThrow()).id;
  await ok('workspaces', 'add-member', '--workspace', hosted, '--email', 'lister@example.test', '--role', 'member');
  assert.equal(await ok('workspaces', 'list', '--email', 'lister@example.test'),
    `${personal}\towner\tPersonal\n${hosted}\tmember\thost@example.test's personal workspace\n`);
  const unknown = await runCli(env, 'workspaces', 'list', '--email', 'nobody@example.test');
  assert.notEqual(unknown.code, 0);
  assert.equal(unknown.stdout, '');
});

test('keys create prints the whole key alone on one line; list, revoke, disable and enable print as specified', async () => {
  await ok('users', 'create', '--email', 'keys@example.test', '--password', 'correct horse');
  const out = await ok('keys', 'create', '--email', 'keys@example.test', '--label', 'laptop');
  assert.match(out, /^ak_[A-Za-z0-9]+_[A-Za-z0-9]+\n$/);
  const { keyId, secret } = parseApiKey(out.trim())!;
  const row = await store.db.selectFrom('api_keys').selectAll().where('id', '=', keyId).executeTakeFirstOrThrow();
  assert.deepEqual(Buffer.from(row.secret_hash), hashSecret(secret));
  assert.equal(row.rate_limit, 60);

  const limited = parseApiKey((await ok('keys', 'create', '--email', 'keys@example.test', '--label', 'ci', '--rate-limit', '5', '--expires-in-days', '7')).trim())!;
  const limitedRow = await store.db.selectFrom('api_keys').selectAll().where('id', '=', limited.keyId).executeTakeFirstOrThrow();
  assert.equal(limitedRow.rate_limit, 5);
  assert.ok(Math.abs(Date.parse(limitedRow.expires_at!) - (Date.now() + 7 * 86_400_000)) < 60_000);

  assert.equal(await ok('keys', 'disable', '--key-id', keyId), '');
  assert.equal(await ok('keys', 'revoke', '--email', 'keys@example.test', '--key-id', limited.keyId), '');
  const lines = (await ok('keys', 'list', '--email', 'keys@example.test')).trimEnd().split('\n');
  assert.equal(lines.length, 2);
  const fields = Object.fromEntries(lines.map((line) => { const f = line.split('\t'); return [f[0], f]; }));
  assert.deepEqual(fields[keyId], [keyId, 'laptop', 'inactive', 'never', 'never']);
  assert.deepEqual(fields[limited.keyId]!.slice(0, 4), [limited.keyId, 'ci', 'revoked', 'never']);
  assert.equal(fields[limited.keyId]![4], limitedRow.expires_at);
  assert.ok(!lines.join('\n').includes(secret) && !lines.join('\n').includes(limited.secret), 'list never shows a secret');

  assert.equal(await ok('keys', 'enable', '--key-id', keyId), '');
  assert.match((await ok('keys', 'list', '--email', 'keys@example.test')), new RegExp(`^${keyId}\tlaptop\tactive\t`, 'm'));
  // A revoked key stays revoked: enable and disable succeed (exit 0, print nothing) and change nothing.
  assert.equal(await ok('keys', 'enable', '--key-id', limited.keyId), '');
  assert.equal(await ok('keys', 'disable', '--key-id', limited.keyId), '');
  assert.match((await ok('keys', 'list', '--email', 'keys@example.test')), new RegExp(`^${limited.keyId}\tci\trevoked\t`, 'm'));
});

test('--key-id also takes ak_<keyId>, or the whole key, for the same key', async () => {
  await ok('users', 'create', '--email', 'key-ids@example.test', '--password', 'correct horse');
  const token = (await ok('keys', 'create', '--email', 'key-ids@example.test', '--label', 'x')).trim();
  const { keyId } = parseApiKey(token)!;
  const status = async () => (await ok('keys', 'list', '--email', 'key-ids@example.test')).split('\t')[2];
  assert.equal(await ok('keys', 'disable', '--key-id', `ak_${keyId}`), '');
  assert.equal(await status(), 'inactive');
  assert.equal(await ok('keys', 'enable', '--key-id', token), '');
  assert.equal(await status(), 'active');
  assert.equal(await ok('keys', 'revoke', '--email', 'key-ids@example.test', '--key-id', `ak_${keyId}`), '');
  assert.equal(await status(), 'revoked');
});

test('keys list keeps one key per line even for a label stored with a tab or line break', async () => {
  await ok('users', 'create', '--email', 'odd-labels@example.test', '--password', 'correct horse');
  const { keyId } = parseApiKey((await ok('keys', 'create', '--email', 'odd-labels@example.test', '--label', 'plain')).trim())!;
  // Labels with control characters are refused at creation; one stored earlier (or by hand) still prints safely.
  await store.db.updateTable('api_keys').set({ label: 'two\nlines\tand a tab' }).where('id', '=', keyId).execute();
  const lines = (await ok('keys', 'list', '--email', 'odd-labels@example.test')).trimEnd().split('\n');
  assert.equal(lines.length, 1);
  assert.deepEqual(lines[0]!.split('\t').slice(0, 3), [keyId, 'two lines and a tab', 'active']);
});

test('--help and -h print the usage and exit 0; a value starting with a dash is given as --flag=value', async () => {
  assert.match(await ok('--help'), /keys create --email E --label L/);
  assert.match(await ok('keys', 'list', '-h'), /^agent-channel <command>/);
  // The server's settings are not flags: a newcomer's `serve --port` is told where they are.
  assert.match(await ok('--help'), /environment variables \(PORT, HOST, LOG_LEVEL, …\)/);
  const flagged = await runCli(env, 'serve', '--port', '9000');
  assert.equal(flagged.code, 2);
  assert.match(flagged.stderr, /^agent-channel: serve takes no flags \(got --port\)\n[\s\S]*PORT=9000 agent-channel serve/);
  await ok('users', 'create', '--email', 'dash@example.test', '--password=-starts-with-a-dash');
});

test('each user command is handed to the client package, and any other word to the operator CLI', async () => {
  for (const name of USER_COMMANDS) {
    const help = await ok(name, '--help');
    assert.match(help, /Every user command takes --json/, name);
    assert.doesNotMatch(help, /Operator commands/, name);
  }
  // A word that only starts like one, or none at all, is the operator's.
  for (const args of [['users', '--help'], ['sends', '--help'], ['--help']]) assert.match(await ok(...args), /Operator commands/, args.join(' '));
});

test('--version, -v and version print the release, as package.json names it', async () => {
  const { version } = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string };
  for (const asked of [['--version'], ['-v'], ['version']]) assert.equal(await ok(...asked), `agent-channel ${version}\n`);
});
