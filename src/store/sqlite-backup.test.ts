import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { after, before, test } from 'node:test';
import { runCli } from '../testing/cli.ts';
import { seededDatabase, TEST_DB, TEST_PG_URL } from '../testing/harness.ts';
import { postMessage, startServerProcess, transcriptFrom } from '../testing/server-process.ts';

/**
 * `agent-channel backup` and `restore` on SQLite, with the real binary and a real server process:
 * a backup taken while turns are being written holds every turn answered before it began, and a
 * restore puts it in place of the database, keeping the one it replaces.
 */

const sqliteOnly = { skip: TEST_DB !== 'sqlite' && 'SQLite pass only (PostgreSQL is backed up with its own tools)' };
const seeded = seededDatabase('backup@example.test', 4, { WAIT_CEILING_MS: '5000' });
let dir: string;
before(() => { dir = mkdtempSync(join(tmpdir(), 'agent-channel-backup-')); });
after(() => { rmSync(dir, { recursive: true, force: true }); });

interface Answered { sessionId: string; text: string; reply: string }

test('a backup taken while the server writes turns holds every one answered before it began; restored, the server serves them and goes on', { ...sqliteOnly, timeout: 120_000 }, async () => {
  const backup = join(dir, 'nested', 'while-serving.db');
  let server = await startServerProcess(seeded.env);
  // A reader on an old snapshot, as any long read is: no checkpoint passes it, so every turn
  // below stays in the write-ahead log, where a copy of the database file alone would miss it.
  const oldSnapshot = new DatabaseSync(seeded.database.url.slice('sqlite:'.length));
  oldSnapshot.exec('BEGIN');
  oldSnapshot.prepare('select count(*) from turns').get();
  try {
    const answered: Answered[] = [];
    let sending = true;
    // Four clients sending one message after another, each to an agent of its own.
    const clients = seeded.agentIds.map(async (agentId, client) => {
      for (let i = 0; sending; i++) {
        const text = `client ${client} message ${i}`;
        const res = await postMessage(server, seeded.key, { text, agent_id: agentId });
        assert.equal(res.status, 200, JSON.stringify(res.body));
        answered.push({ sessionId: res.body.session_id, text, reply: res.body.reply });
      }
    });
    const clientsDone = Promise.all(clients);
    let answeredBefore: Answered[];
    try {
      // (A client that failed ends the wait with its failure.)
      while (answered.length < 40) await Promise.race([clientsDone, new Promise((resolve) => setTimeout(resolve, 10))]);
      answeredBefore = [...answered];
      const result = await runCli(seeded.env, 'backup', '--to', backup);
      assert.equal(result.code, 0, result.stderr);
      assert.equal(result.stdout, '');
      assert.ok(answered.length > answeredBefore.length, 'turns went on being written while the backup ran');
    } finally {
      sending = false;
      await clientsDone;
      oldSnapshot.close();
    }
    assert.equal(readdirSync(join(dir, 'nested')).join(','), 'while-serving.db', 'one file, no log beside it');

    // Restoring needs the server stopped; it is refused while one runs, and nothing changes.
    const refused = await runCli(seeded.env, 'restore', '--from', backup);
    assert.equal(refused.code, 1);
    assert.match(refused.stderr, /^agent-channel: an agent-channel server \(or another restore\) is running on .*: stop it, then restore; nothing was changed\n$/);
    for (const { sessionId, text } of answered.slice(-3)) {
      assert.ok((await transcriptFrom(server, seeded.key, sessionId)).messages.some((m: { text: string }) => m.text === text));
    }
    await server.kill('SIGTERM');

    const restored = await runCli(seeded.env, 'restore', '--from', backup);
    assert.equal(restored.code, 0, restored.stderr);
    const keptAs = restored.stdout.trim();
    assert.match(keptAs, /\.db\.replaced-\d{4}-\d\d-\d\dT\d\d-\d\d-\d\d\.\d{3}Z$/);
    assert.ok(existsSync(backup), 'the backup itself is left as it was');

    // The database replaced is kept whole: every turn ever answered is in it, its log included.
    const kept = new DatabaseSync(keptAs, { readOnly: true });
    try {
      const agentTurns = kept.prepare(`select text from turns where role = 'agent'`).all().map((row) => String(row.text));
      for (const { reply } of answered) assert.ok(agentTurns.includes(reply), `the kept database lacks "${reply}"`);
    } finally {
      kept.close();
    }

    server = await startServerProcess(seeded.env);
    for (const { sessionId, text, reply } of answeredBefore) {
      const { messages } = await transcriptFrom(server, seeded.key, sessionId);
      const at = messages.findIndex((m: { role: string; text: string }) => m.role === 'user' && m.text === text);
      assert.ok(at >= 0, `"${text}" is not in the restored transcript`);
      assert.equal(messages[at + 1]?.text, reply);
    }
    // A session of the backup goes on: the new turns come after the restored ones.
    const { sessionId } = answeredBefore[0]!;
    const next = await postMessage(server, seeded.key, { text: 'after the restore', session_id: sessionId });
    assert.equal(next.status, 200, JSON.stringify(next.body));
    const { messages } = await transcriptFrom(server, seeded.key, sessionId);
    const stamps = messages.map((m: { ts: string }) => m.ts);
    assert.deepEqual(stamps, [...stamps].sort(), 'ts still strictly increasing');
    assert.equal(new Set(stamps).size, stamps.length);
    assert.equal(messages.at(-1).text, next.body.reply);
  } finally {
    if (oldSnapshot.isOpen) oldSnapshot.close();
    await server.kill('SIGTERM'); // whichever runs last (a failure above must not leave it running)
  }
});

test('backup and restore refuse what cannot work, with the reason, and change nothing', sqliteOnly, async () => {
  const existing = join(dir, 'existing.db');
  writeFileSync(existing, 'not empty');
  const notADatabase = join(dir, 'garbage.db');
  writeFileSync(notADatabase, 'x'.repeat(4096));
  const someoneElses = join(dir, 'someone-elses.db');
  new DatabaseSync(someoneElses).exec('create table notes (text text)');
  const missingDatabase = { DATABASE_URL: `sqlite:${join(dir, 'none', 'missing.db')}` };
  const cases: Array<[string, Record<string, string>, string[], RegExp]> = [
    ['a backup onto a file that exists', seeded.env, ['backup', '--to', existing], /existing\.db already exists: a backup is written to a new file/],
    // (was Node's bare "ENOTDIR: not a directory, open …", saying not what was being written)
    ['a backup into a "folder" that is a file', seeded.env, ['backup', '--to', join(existing, 'b.db')], /^agent-channel: cannot write the backup to .*existing\.db\/b\.db: ENOTDIR/],
    ['a backup of a database that is not there', missingDatabase, ['backup', '--to', join(dir, 'new.db')], /no database at .*missing\.db to back up/],
    ['a backup with no --to', seeded.env, ['backup'], /--to is required/],
    ['a restore from a file that is not there', seeded.env, ['restore', '--from', join(dir, 'nope.db')], /no backup at .*nope\.db/],
    ['a restore from a file that is not a database', seeded.env, ['restore', '--from', notADatabase], /garbage\.db is not a backup of an agent-channel database \(file is not a database\); nothing was changed/],
    ['a restore from another program\'s database', seeded.env, ['restore', '--from', someoneElses], /not a backup of an agent-channel database \(it has no agent-channel tables\)/],
  ];
  const before = readdirSync(dir).sort();
  for (const [what, env, args, why] of cases) {
    const result = await runCli(env, ...args);
    assert.notEqual(result.code, 0, what);
    assert.match(result.stderr, /^agent-channel: /, what);
    assert.match(result.stderr, why, what);
    assert.equal(result.stdout, '', what);
  }
  assert.deepEqual(readdirSync(dir).sort(), before, 'no file made, moved or removed');
  assert.equal(existsSync(join(dir, 'new.db')), false);
  // The database the refused restores named is untouched and still serves.
  const server = await startServerProcess(seeded.env);
  try {
    assert.equal((await postMessage(server, seeded.key, { text: 'still here', agent_id: seeded.agentIds[0] })).status, 200);
  } finally {
    await server.kill('SIGTERM');
  }
});

test('on PostgreSQL, backup and restore point to PostgreSQL\'s own tools', async () => {
  for (const command of [['backup', '--to', join(dir ?? tmpdir(), 'pg.db')], ['restore', '--from', join(tmpdir(), 'pg.db')]]) {
    const result = await runCli({ DATABASE_URL: TEST_PG_URL }, ...command);
    assert.equal(result.code, 1, result.stderr);
    assert.match(result.stderr, new RegExp(`^agent-channel: ${command[0]} works on a SQLite database; on PostgreSQL, use its own tools: pg_dump`));
  }
});
