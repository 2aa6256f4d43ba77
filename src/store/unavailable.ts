/**
 * Whether an error says the database could not do the work just now, rather than that the work
 * itself is wrong: the same statement may well succeed in a moment. The engine retries writing a
 * finished turn's outcome on such an error (instead of recording a failure), and the API answers
 * 503 with Retry-After (instead of a 500 "fault of ours").
 */
export function isStoreUnavailable(error: unknown): boolean {
  if (!error || typeof error !== 'object') return false;
  const e = error as { errcode?: unknown; code?: unknown; message?: unknown };
  // node:sqlite: the primary result code is the low byte of the extended one.
  if (typeof e.errcode === 'number') return SQLITE_UNAVAILABLE.has(e.errcode % 256);
  if (typeof e.code === 'string') {
    if (NODE_NETWORK_CODES.has(e.code)) return true;
    // PostgreSQL SQLSTATE: connection exceptions (class 08), insufficient resources (53: disk
    // full, out of memory, too many connections), the server shutting down or starting (57P01–3).
    if (/^(08|53)[0-9A-Z]{3}$/.test(e.code) || /^57P0[123]$/.test(e.code)) return true;
  }
  // node-postgres' own words for a connection that went away or never came.
  return typeof e.message === 'string' && PG_CONNECTION_MESSAGES.test(e.message);
}

// SQLITE_BUSY, SQLITE_LOCKED, SQLITE_NOMEM, SQLITE_IOERR, SQLITE_FULL, SQLITE_CANTOPEN.
const SQLITE_UNAVAILABLE = new Set([5, 6, 7, 10, 13, 14]);

const NODE_NETWORK_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'EHOSTUNREACH', 'ENETUNREACH', 'EAI_AGAIN']);

const PG_CONNECTION_MESSAGES = /^(Connection terminated|timeout exceeded when trying to connect|Client has encountered a connection error|Cannot use a pool after calling end|Query read timeout)/;
