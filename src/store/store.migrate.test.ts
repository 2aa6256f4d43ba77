import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { sql } from 'kysely';
import { runCli } from '../testing/cli.ts';
import { TEST_DB } from '../testing/harness.ts';
import { openStore } from './store.ts';

/**
 * The server and the CLI may open a new SQLite file at the same moment (the README's first
 * steps do): each migrates it at start, and Kysely takes no lock on SQLite. Without one, the
 * second process created tables the first had just made, or failed to switch the file to WAL.
 */
test('processes opening a new SQLite file at the same moment all migrate it, once', { skip: TEST_DB !== 'sqlite' && 'SQLite pass only' }, async () => {
  for (let round = 0; round < 5; round++) {
    const dir = mkdtempSync(join(tmpdir(), 'agent-channel-migrate-'));
    try {
      const env = { DATABASE_URL: `sqlite:${join(dir, 'new.db')}`, SCRYPT_COST_LOG2: '10' };
      const emails = [0, 1, 2, 3].map((i) => `at-once-${i}@example.test`);
      const results = await Promise.all(emails.map((email) => runCli(env, 'users', 'create', '--email', email, '--password', 'a long password')));
      for (const result of results) assert.equal(result.code, 0, `round ${round}: ${result.stderr}`);

      const store = await openStore(env.DATABASE_URL);
      try {
        const users = await store.db.selectFrom('users').select('email').orderBy('email').execute();
        assert.deepEqual(users.map((u) => u.email), emails);
        const { rows } = await sql<{ name: string }>`select name from kysely_migration order by name`.execute(store.db);
        assert.equal(new Set(rows.map((r) => r.name)).size, rows.length, 'each migration recorded once');
      } finally {
        await store.close();
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }
});
