import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { SqliteServerLock } from './sqlite-server-lock.ts';
import { openStore } from './store.ts';

/** One server per SQLite file (Store.claimForServer): a real file, real processes. */
let dir: string;
let url: string;
before(() => {
  dir = mkdtempSync(join(tmpdir(), 'agent-channel-server-lock-'));
  url = `sqlite:${join(dir, 'test.db')}`;
});
after(() => rmSync(dir, { recursive: true, force: true }));

/** Another process tries to claim the file; returns what it printed. */
function claimInAnotherProcess(): string {
  const storeModule = new URL('./store.ts', import.meta.url).href;
  return execFileSync(process.execPath, ['--input-type=module', '-e', `
    const { openStore } = await import(${JSON.stringify(storeModule)});
    const store = await openStore(${JSON.stringify(url)});
    try { store.claimForServer(); console.log('claimed'); } catch (error) { console.log(error.message); }
    await store.close();
  `], { encoding: 'utf8' }).trim();
}

test('a lock file that cannot be made or opened is named, with what it is for', async () => {
  const path = join(dir, 'unlockable.db');
  mkdirSync(`${path}.lock`); // (as root, a folder is what refuses: permissions do not)
  assert.throws(() => SqliteServerLock.acquire(path), (error: Error) => {
    assert.match(error.message, new RegExp(`^cannot lock the SQLite database ${path.replaceAll('.', '\\.')}: .+ \\(a server keeps unlockable\\.db\\.lock beside the database, in a folder it may write to`));
    return true;
  });
});

test('a claimed file is refused to a second server, in this process or another, until the first closes', async () => {
  const first = await openStore(url);
  first.claimForServer();
  first.claimForServer(); // again: still one claim, no error
  const second = await openStore(url);
  try {
    assert.throws(() => second.claimForServer(), (error: Error) => {
      assert.equal(error.message, `another agent-channel server is using the SQLite database ${join(dir, 'test.db')}`
        + ' (one server per SQLite file; several instances share a PostgreSQL database instead)');
      return true;
    });
    assert.match(claimInAnotherProcess(), /^another agent-channel server is using the SQLite database/);
    await first.close();
    second.claimForServer(); // free once the holder has closed
  } finally {
    await second.close();
  }
  assert.equal(claimInAnotherProcess(), 'claimed', 'closing released it');
});

test('the CLI (a store that does not claim) reads and writes beside a claimed file', async () => {
  const server = await openStore(url);
  server.claimForServer();
  const cli = await openStore(url);
  try {
    await cli.db.insertInto('users').values({
      id: 'usr_lockcheck', email: 'lock@example.test', password_hash: 'x', plan: 'free', created_at: new Date().toISOString(),
    }).execute();
    const row = await server.db.selectFrom('users').select('email').where('id', '=', 'usr_lockcheck').executeTakeFirst();
    assert.equal(row?.email, 'lock@example.test');
  } finally {
    await cli.close();
    await server.close();
  }
});

test('an in-memory database has no file to claim: nothing is locked or written beside it', async () => {
  const memory = await openStore('sqlite::memory:');
  memory.claimForServer();
  await memory.close();
  assert.equal(existsSync(':memory:.lock'), false, 'no lock file named after the in-memory database');
});

test('one file reached by two names (a symbolic link to it, or to its folder) is one claim', async () => {
  const first = await openStore(url);
  first.claimForServer();
  symlinkSync(join(dir, 'test.db'), join(dir, 'link-to-test.db'));
  const linkedFolder = `${dir}-link`;
  symlinkSync(dir, linkedFolder);
  try {
    for (const other of [join(dir, 'link-to-test.db'), join(linkedFolder, 'test.db')]) {
      const second = await openStore(`sqlite:${other}`);
      try {
        assert.throws(() => second.claimForServer(), /^Error: another agent-channel server is using the SQLite database /, other);
      } finally {
        await second.close();
      }
    }
    // A file not made yet is named through its folder's real path.
    mkdirSync(join(dir, 'later'));
    const held = SqliteServerLock.acquire(join(dir, 'later', 'new.db'));
    try {
      assert.throws(() => SqliteServerLock.acquire(join(linkedFolder, 'later', 'new.db')), /another agent-channel server is using/);
    } finally {
      held.release();
    }
  } finally {
    await first.close();
    rmSync(linkedFolder);
  }
});

test('a server\'s store claims the file before it opens it: refused, it has made, migrated and left nothing', async () => {
  const folder = join(dir, 'claimed-first');
  mkdirSync(folder);
  const fresh = join(folder, 'new.db');
  const held = SqliteServerLock.acquire(fresh); // as a restore under way, or another server, holds it
  try {
    await assert.rejects(openStore(`sqlite:${fresh}`, { forServer: true }), /^Error: another agent-channel server is using the SQLite database/);
    const lockFiles = /^new\.db\.lock/; // the claim's own (its lock file, and that file's journal)
    assert.deepEqual(readdirSync(folder).filter((name) => !lockFiles.test(name)), [], 'no database, no log beside it');
  } finally {
    held.release();
  }
  const server = await openStore(`sqlite:${fresh}`, { forServer: true });
  try {
    assert.throws(() => SqliteServerLock.acquire(fresh), /another agent-channel server/, 'held from the open on');
  } finally {
    await server.close();
  }
});
