import assert from 'node:assert/strict';
import { createServer, type AddressInfo } from 'node:net';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { after, before, test } from 'node:test';
import { sql } from 'kysely';
import { verifyPassword } from '../domain/password.ts';
import { LoginThrottle } from '../services/login-throttle.ts';
import { openStore } from '../store/store.ts';
import { runCli } from '../testing/cli.ts';
import { startBlackHole } from '../testing/frozen-database.ts';
import { databaseEnv, freshDatabase, TEST_DB, TEST_PG_URL, type TestDatabase } from '../testing/harness.ts';

let database: TestDatabase;
let env: Record<string, string>;
before(async () => {
  database = await freshDatabase();
  env = { ...databaseEnv(database), SCRYPT_COST_LOG2: '10' };
  const setup = await runCli(env, 'users', 'create', '--email', 'someone@example.test', '--password', 'correct horse');
  assert.equal(setup.code, 0, setup.stderr);
});
after(async () => { await database.drop(); });

const failures: Array<[string, string[], RegExp]> = [
  ['an unknown command', ['frobnicate', 'now'], /unknown command/],
  ['an unknown flag', ['users', 'create', '--email', 'x@example.test', '--password', 'correct horse', '--colour', 'red'], /^agent-channel: unknown flag --colour\n/],
  ['a missing required flag', ['keys', 'create', '--email', 'someone@example.test'], /--label is required/],
  ['an invalid email', ['users', 'create', '--email', 'not-an-email', '--password', 'correct horse'], /email/],
  ['an email already registered', ['users', 'create', '--email', 'someone@example.test', '--password', 'correct horse'], /already registered/],
  ['a plan that does not exist', ['users', 'create', '--email', 'p@example.test', '--password', 'correct horse', '--plan', 'gold'], /--plan/],
  ['an unknown user', ['keys', 'list', '--email', 'nobody@example.test'], /nobody@example\.test/],
  ['a rate limit out of range', ['keys', 'create', '--email', 'someone@example.test', '--label', 'x', '--rate-limit', '0'], /^agent-channel: --rate-limit must be from 1 to 10000 requests a minute\n$/],
  ['an expiry out of range', ['keys', 'create', '--email', 'someone@example.test', '--label', 'x', '--expires-in-days', '5000'], /^agent-channel: --expires-in-days must be from 1 to 3650 days\n$/],
  // A value the service refuses is said in the flag's words, never the validator's ("Too big: expected string…").
  ['a rate limit past 2^53', ['keys', 'create', '--email', 'someone@example.test', '--label', 'x', '--rate-limit', '99999999999999999999'], /^agent-channel: --rate-limit must be from 1 to 10000 requests a minute\n$/],
  ['an expiry past 2^53', ['keys', 'create', '--email', 'someone@example.test', '--label', 'x', '--expires-in-days=-99999999999999999999'], /^agent-channel: --expires-in-days must be from 1 to 3650 days\n$/],
  ['a password over 256 characters', ['users', 'create', '--email', 'long@example.test', '--password', 'p'.repeat(257)], /^agent-channel: --password must be at most 256 characters\n$/],
  ['an email over 254 characters', ['users', 'create', '--email', `${'e'.repeat(250)}@example.test`, '--password', 'correct horse'], /^agent-channel: --email must be at most 254 characters\n$/],
  ['an empty --workspace', ['agents', 'create', '--email', 'someone@example.test', '--name', 'n', '--workspace', ''], /^agent-channel: --workspace must not be empty\n$/],
  ['a rate limit that is not a number', ['keys', 'create', '--email', 'someone@example.test', '--label', 'x', '--rate-limit', 'lots'], /whole number/],
  ['revoking a key that does not exist', ['keys', 'revoke', '--email', 'someone@example.test', '--key-id', 'NoSuchKey0000000'], /No such key\. --key-id takes the id that `keys list/],
  ['enabling a key that does not exist', ['keys', 'enable', '--key-id', 'NoSuchKey0000000'], /key/i],
  ['a role that does not exist', ['workspaces', 'add-member', '--workspace', 'wsp_x', '--email', 'someone@example.test', '--role', 'owner'], /--role/],
  ['an unknown workspace', ['workspaces', 'add-member', '--workspace', 'wsp_nope', '--email', 'someone@example.test', '--role', 'member'], /workspace/i],
  ['a flag value that looks like a flag', ['users', 'create', '--email', 'h@example.test', '--password', '-h'], /--password=/],
  ['extra words after a command', ['keys', 'list', 'now', '--email', 'someone@example.test'], /unknown command "keys list now"/],
  ['a flag given twice', ['keys', 'list', '--email', 'someone@example.test', '--email', 'other@example.test'], /^agent-channel: --email is given twice\n/],
  ['a flag of another command', ['keys', 'list', '--email', 'someone@example.test', '--label', 'laptop'], /^agent-channel: keys list takes no --label \(it takes --email\)\n/],
  ['words after version', ['version', 'extra'], /^agent-channel: version takes nothing after it\n/],
  ['a flag after help', ['help', '--email', 'someone@example.test'], /^agent-channel: help takes nothing after it\n/],
  ['a flag given to serve', ['serve', '--email', 'someone@example.test'], /^agent-channel: serve takes no flags \(got --email\)\n/],
  ['a flag no command takes given to serve', ['serve', '--port', '9000'], /^agent-channel: serve takes no flags \(got --port\)\n[^]*PORT=9000 agent-channel serve/],
  ['a label with a line break', ['keys', 'create', '--email', 'someone@example.test', '--label', 'one\ntwo'], /control characters/],
];

for (const [what, args, message] of failures) {
  test(`${what}: a message on stderr, nothing on stdout, a non-zero exit`, async () => {
    const result = await runCli(env, ...args);
    assert.notEqual(result.code, 0);
    assert.equal(result.stdout, '');
    assert.match(result.stderr, message);
    assert.match(result.stderr, /^agent-channel: \S/, 'one form for every mistake: the program, then why');
    assert.doesNotMatch(result.stderr, /\n\s+at .+:\d+:\d+/, 'no stack trace');
  });
}

test('a whole key typed where --key-id was meant is not echoed back (its secret left out)', async () => {
  const key = 'ak_AbCdEf0123456789_' + 'S3cr3t'.repeat(8);
  const result = await runCli(env, 'keys', 'disable', key);
  assert.equal(result.code, 2);
  assert.match(result.stderr, /unknown command "keys disable ak_AbCdEf0123456789_…"/);
  assert.doesNotMatch(result.stderr, /S3cr3t/);
});

test('a SQLite database another process holds locked past the busy timeout: said as such, nothing changed, exit 1', { skip: TEST_DB !== 'sqlite' && 'SQLite\'s lock' }, async () => {
  const holder = new DatabaseSync(database.url.slice('sqlite:'.length));
  holder.exec('BEGIN EXCLUSIVE');
  try {
    const result = await runCli(env, 'users', 'create', '--email', 'locked-out@example.test', '--password', 'correct horse');
    assert.equal(result.code, 1);
    assert.equal(result.stdout, '');
    // (was "agent-channel: database is locked", which said neither that it passes nor what to do)
    assert.equal(result.stderr, 'agent-channel: the database could not be used just now (database is locked); nothing was changed: run the command again in a moment\n');
  } finally {
    holder.exec('ROLLBACK');
    holder.close();
  }
  assert.equal((await runCli(env, 'users', 'create', '--email', 'locked-out@example.test', '--password', 'correct horse')).code, 0, 'run again, it works');
});

test('a second agent on the free plan is refused with the plan\'s reason', async () => {
  assert.equal((await runCli(env, 'agents', 'create', '--email', 'someone@example.test', '--name', 'one')).code, 0);
  const second = await runCli(env, 'agents', 'create', '--email', 'someone@example.test', '--name', 'two');
  assert.notEqual(second.code, 0);
  assert.equal(second.stdout, '');
  assert.match(second.stderr, /plan/);
});

test('a setting or a database that cannot work stops serve and the CLI with one line saying why, exit 1, no stack', async () => {
  const taken = createServer();
  await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
  const takenPort = (taken.address() as AddressInfo).port;
  after(() => taken.close());
  for (const [extra, args, why] of [
    [{ HOST: '127.0.0.1', PORT: String(takenPort) }, ['serve'], new RegExp(`^agent-channel: cannot listen on HOST 127\\.0\\.0\\.1, PORT ${takenPort}: .*EADDRINUSE`)],
    [{ DATABASE_URL: 'postgres://127.0.0.1:1/test?schema=Bad-Name' }, ['keys', 'list', '--email', 'x@example.test'],
      /^agent-channel: DATABASE_URL's \?schema= must be 1–63 lowercase letters, digits and underscores, not starting with a digit \(got "Bad-Name"\)$/],
    [{ PORT: '1e3' }, ['serve'], /^agent-channel: PORT must be an integer between 0 and 65535 \(got "1e3"\)$/],
    [{ RATE_LIMIT_STORE: 'redis', REDIS_URL: 'redis://127.0.0.1:6379x' }, ['serve'], /^agent-channel: REDIS_URL must be a redis:\/\/ or rediss:\/\/ URL, .*\(it cannot be read as a URL\)$/],
    [{ RATE_LIMIT_STORE: 'redis', REDIS_URL: 'notaurl' }, ['serve'], /^agent-channel: REDIS_URL must be a redis:\/\/ or rediss:\/\/ URL/],
    [{ DATABASE_URL: 'postgres://127.0.0.1:1/test' }, ['serve'],
      /^agent-channel: cannot connect to the PostgreSQL database at DATABASE_URL postgres:\/\/127\.0\.0\.1:1\/test: connect ECONNREFUSED 127\.0\.0\.1:1$/],
    [{ DATABASE_URL: 'postgres://127.0.0.1:1/test?schema=mine' }, ['keys', 'list', '--email', 'x@example.test'],
      /^agent-channel: cannot connect to the PostgreSQL database at DATABASE_URL postgres:\/\/127\.0\.0\.1:1\/test\?schema=mine: connect ECONNREFUSED/],
    [{ LOG_LEVEL: 'verbose' }, ['serve'], /^agent-channel: LOG_LEVEL must be one of/],
    // (was URL's own "Invalid URL", naming no setting)
    [{ DATABASE_URL: 'postgres://postgres:hunter2@127.0.0.1:99999/x' }, ['keys', 'list', '--email', 'x@example.test'],
      /^agent-channel: DATABASE_URL must be sqlite:<path> or a PostgreSQL URL, .*\(it cannot be read as a URL\)$/],
    // A bare path, the likeliest slip: echoed whole (it holds no password), with the form that works.
    [{ DATABASE_URL: './data/mine.db' }, ['keys', 'list', '--email', 'x@example.test'],
      /^agent-channel: DATABASE_URL must start with sqlite: or postgres:\/\/ \(got "\.\/data\/mine\.db"; a SQLite file is written sqlite:\.\/data\/mine\.db\)$/],
    [{ DATABASE_URL: 'mysql://root:hunter2@db/app' }, ['keys', 'list', '--email', 'x@example.test'],
      /^agent-channel: DATABASE_URL must start with sqlite: or postgres:\/\/ \(got "mysql:…"\)$/],
    [{ DATABASE_URL: `sqlite:${tmpdir()}` }, ['users', 'create', '--email', 'x@example.test', '--password', 'correct horse'],
      /^agent-channel: cannot open the SQLite database .+: unable to open database file$/],
    // A folder that cannot be made (Node's own recursive mkdir loops for ever under /proc).
    [{ DATABASE_URL: 'sqlite:/proc/no-such-folder/x.db' }, ['keys', 'list', '--email', 'x@example.test'],
      /^agent-channel: cannot open the SQLite database \/proc\/no-such-folder\/x\.db: ENOENT/],
  ] as const) {
    const result = await runCli({ ...env, ...extra }, ...args);
    assert.equal(result.code, 1, result.stderr);
    assert.match(result.stderr.trim(), why);
    assert.doesNotMatch(result.stderr, /\n\s+at /, 'no stack');
  }
});

test('a database that refuses us at start is named by its setting, DATABASE_URL, without the password', { skip: TEST_DB !== 'postgres' && 'needs a PostgreSQL that answers' }, async () => {
  const url = new URL(TEST_PG_URL);
  url.username = 'no_such_role';
  url.password = 'hunter2-secret';
  for (const args of [['serve'], ['keys', 'list', '--email', 'x@example.test']]) {
    const result = await runCli({ ...env, DATABASE_URL: url.toString() }, ...args);
    assert.equal(result.code, 1, result.stderr);
    assert.match(result.stderr.trim(), /^agent-channel: cannot connect to the PostgreSQL database at DATABASE_URL postgres:\/\/no_such_role:\*\*\*@[^ ]+: .*"no_such_role"/);
    assert.doesNotMatch(result.stderr, /hunter2/);
  }
});

test('a HOST that cannot be listened on stops serve before the database is opened: no SQLite file is made', async () => {
  const folder = mkdtempSync(join(tmpdir(), 'agent-channel-host-'));
  after(() => rmSync(folder, { recursive: true, force: true }));
  // (.invalid never resolves: RFC 6761)
  const result = await runCli({ DATABASE_URL: `sqlite:${join(folder, 'never.db')}`, HOST: 'no-such-host.invalid', PORT: '0' }, 'serve');
  assert.equal(result.code, 1, result.stderr);
  assert.match(result.stderr.trim(), /^agent-channel: cannot listen on HOST no-such-host\.invalid, PORT 0: getaddrinfo ENOTFOUND/);
  assert.deepEqual(readdirSync(folder), [], 'nothing was created');
});

test('DATABASE_URL sqlite://<path> is refused, naming the form that works, instead of making a database from the root', async () => {
  const folder = mkdtempSync(join(tmpdir(), 'agent-channel-url-'));
  after(() => rmSync(folder, { recursive: true, force: true }));
  // folder is absolute: sqlite:/ + /tmp/… is sqlite://tmp/…, which was read as the path //tmp/…, that is /tmp/…
  // (and sqlite://./data/x.db as /data/x.db).
  const refused = await runCli({ DATABASE_URL: `sqlite:/${folder}/x.db` }, 'keys', 'list', '--email', 'x@example.test');
  assert.equal(refused.code, 1, refused.stderr);
  assert.match(refused.stderr.trim(), /^agent-channel: DATABASE_URL must be sqlite:<path>, such as sqlite:\.\/data\/agent-channel\.db .*\(got "sqlite:\/\/tmp\//);
  assert.deepEqual(readdirSync(folder), [], 'nothing was created');
  // sqlite:///<absolute path> is that absolute path, as in a file: URL.
  const absolute = await runCli({ DATABASE_URL: `sqlite://${folder}/y.db` }, 'keys', 'list', '--email', 'x@example.test');
  assert.match(absolute.stderr, /No user with email/);
  assert.ok(readdirSync(folder).includes('y.db'));
});

test('a database that accepts the connection and never answers stops serve at start, naming DATABASE_URL, instead of hanging', { timeout: 90_000 }, async () => {
  const blackHole = await startBlackHole();
  after(() => blackHole.close());
  const url = `postgres://postgres@127.0.0.1:${blackHole.port}/test`;
  const result = await runCli({ DATABASE_URL: url }, 'serve'); // (runCli gives up after 60 s)
  assert.equal(result.code, 1, `exit ${result.code}: ${result.stderr}`);
  assert.match(result.stderr.trim(), new RegExp(`^agent-channel: cannot connect to the PostgreSQL database at DATABASE_URL ${url.replaceAll('.', '\\.')}: .*timeout`));
});

test('users set-password that fails part-way changes nothing: the password, the web sessions and the failed log-ins stay as they were', async () => {
  const email = 'half-way@example.test';
  const created = await runCli(env, 'users', 'create', '--email', email, '--password', 'the old password');
  assert.equal(created.code, 0, created.stderr);
  const store = await openStore(env.DATABASE_URL!);
  try {
    await new LoginThrottle(store).beginLogin(email, '192.0.2.9'); // a failed log-in to forget
    // Forgetting the failed log-ins fails (as a database busy past its timeout would).
    if (store.dialect === 'postgres') {
      await sql`create function refuse_forgetting() returns trigger language plpgsql as $$ begin raise exception 'forgetting refused'; end $$`.execute(store.db);
      await sql`create trigger refuse_forgetting before delete on login_attempts for each row execute function refuse_forgetting()`.execute(store.db);
    } else {
      await sql`create trigger refuse_forgetting before delete on login_attempts begin select raise(abort, 'forgetting refused'); end`.execute(store.db);
    }
    const result = await runCli(env, 'users', 'set-password', '--email', email, '--password', 'the new password');
    assert.equal(result.code, 1);
    assert.match(result.stderr, /forgetting refused/);
    const { password_hash: hash } = await store.db.selectFrom('users').select('password_hash').where('email', '=', email).executeTakeFirstOrThrow();
    assert.equal(await verifyPassword('the old password', hash), true, 'the command failed: the old password still logs in');
  } finally {
    await sql`drop trigger if exists refuse_forgetting${sql.raw(store.dialect === 'postgres' ? ' on login_attempts' : '')}`.execute(store.db);
    if (store.dialect === 'postgres') await sql`drop function if exists refuse_forgetting()`.execute(store.db);
    await store.close();
  }
});
