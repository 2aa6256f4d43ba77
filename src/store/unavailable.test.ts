import assert from 'node:assert/strict';
import { test } from 'node:test';
import { isStoreUnavailable, markStoreError } from './unavailable.ts';

/** An error as the store's driver passes it on (marked), or as anything else meets it. */
const fromStore = <E extends object>(error: E): E => {
  markStoreError(error);
  return error;
};

test('a database that cannot do the work just now is told from work that is wrong', () => {
  const away = [
    { code: 'ERR_SQLITE_ERROR', errcode: 13, errstr: 'database or disk is full' },
    { code: 'ERR_SQLITE_ERROR', errcode: 5, errstr: 'database is locked' },
    { code: 'ERR_SQLITE_ERROR', errcode: 10 | (3 << 8), errstr: 'disk I/O error' }, // SQLITE_IOERR_WRITE
    { code: '53100', message: 'could not extend file: No space left on device' },
    { code: '57P01', message: 'terminating connection due to administrator command' },
    { code: '08006', message: 'connection failure' },
    { code: '57014', message: 'canceling statement due to statement timeout' },
    fromStore(Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' })),
    fromStore(new Error('Connection terminated unexpectedly')),
    fromStore(new Error('timeout exceeded when trying to connect')),
    fromStore(new Error('timeout expired')), // pg's own connect timeout, a frozen server's usual first sign
    fromStore(new Error('PostgreSQL did not answer within 35 s: the connection was dropped')),
  ];
  for (const error of away) assert.equal(isStoreUnavailable(error), true, JSON.stringify(error));
  const wrong = [
    { code: 'ERR_SQLITE_ERROR', errcode: 19, errstr: 'constraint failed' },
    { code: 'ERR_SQLITE_ERROR', errcode: 1, errstr: 'SQL logic error' },
    { code: '23505', message: 'duplicate key value violates unique constraint' },
    { code: '42P01', message: 'relation "jobs" does not exist' },
    new Error('boom'),
    // The same words from elsewhere (a tool's own connection, a client hanging up mid-body).
    Object.assign(new Error('connect ECONNREFUSED 10.0.0.1:443'), { code: 'ECONNREFUSED' }),
    Object.assign(new Error('aborted'), { code: 'ECONNRESET', statusCode: 400 }),
    new Error('Connection terminated unexpectedly'),
    new Error('timeout expired'),
    null,
    'a string',
  ];
  for (const error of wrong) assert.equal(isStoreUnavailable(error), false, JSON.stringify(error));
});
