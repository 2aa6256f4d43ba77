/**
 * `npm test` after type-checking: the whole suite on SQLite, then again on PostgreSQL when one
 * answers (always under CI=true, where an unreachable PostgreSQL is a failure).
 * Browser tests (*.browser.test.ts) skip themselves in the PostgreSQL pass (they test pages).
 */
import { spawnSync } from 'node:child_process';
import pg from 'pg';

const pgUrl = process.env.TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const only = process.argv.slice(2); // optional file globs to narrow a local run
const files = only.length > 0 ? only : ['src/**/*.test.ts', 'packages/*/test/**/*.test.ts'];

async function postgresAnswers(): Promise<boolean> {
  const client = new pg.Client({ connectionString: pgUrl, connectionTimeoutMillis: 2000 });
  try {
    await client.connect();
    await client.query('select 1');
    return true;
  } catch {
    return false;
  } finally {
    await client.end().catch(() => {});
  }
}

function runPass(db: 'sqlite' | 'postgres', extraArgs: string[]): number {
  console.log(`\n=== tests on ${db} ===`);
  const result = spawnSync(process.execPath, [
    '--test', '--test-concurrency=3', '--test-timeout=120000', ...extraArgs, ...files,
  ], { stdio: 'inherit', env: { ...process.env, TEST_DB: db, TEST_DATABASE_URL: pgUrl } });
  return result.status ?? 1;
}

let failed = runPass('sqlite', []) !== 0;
if (await postgresAnswers()) {
  failed = runPass('postgres', []) !== 0 || failed;
} else if (process.env.CI === 'true') {
  console.error(`PostgreSQL does not answer at ${pgUrl}; CI requires the PostgreSQL pass.`);
  failed = true;
} else {
  console.log(`\n(PostgreSQL does not answer at ${pgUrl}: skipped the PostgreSQL pass.)`);
}
process.exit(failed ? 1 : 0);
