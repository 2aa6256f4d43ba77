import assert from 'node:assert/strict';
import { test } from 'node:test';
import { isStoreUnavailable } from './unavailable.ts';

test('a database that cannot do the work just now is told from work that is wrong', () => {
  const away = [
    { code: 'ERR_SQLITE_ERROR', errcode: 13, errstr: 'database or disk is full' },
    { code: 'ERR_SQLITE_ERROR', errcode: 5, errstr: 'database is locked' },
    { code: 'ERR_SQLITE_ERROR', errcode: 10 | (3 << 8), errstr: 'disk I/O error' }, // SQLITE_IOERR_WRITE
    { code: '53100', message: 'could not extend file: No space left on device' },
    { code: '57P01', message: 'terminating connection due to administrator command' },
    { code: '08006', message: 'connection failure' },
    Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' }),
    new Error('Connection terminated unexpectedly'),
    new Error('timeout exceeded when trying to connect'),
  ];
  for (const error of away) assert.equal(isStoreUnavailable(error), true, JSON.stringify(error));
  const wrong = [
    { code: 'ERR_SQLITE_ERROR', errcode: 19, errstr: 'constraint failed' },
    { code: 'ERR_SQLITE_ERROR', errcode: 1, errstr: 'SQL logic error' },
    { code: '23505', message: 'duplicate key value violates unique constraint' },
    { code: '42P01', message: 'relation "jobs" does not exist' },
    new Error('boom'),
    null,
    'a string',
  ];
  for (const error of wrong) assert.equal(isStoreUnavailable(error), false, JSON.stringify(error));
});
