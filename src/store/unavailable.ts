/**
 * Errors that came from the store's own connections (see markStoreError): a network error or a
 * dropped connection counts as the database's trouble only there, never when a tool or a client
 * connection of ours meets one.
 */
const fromTheStore = new WeakSet<object>();

/** Marks an error the store's driver passed on (PostgreSQL: a statement, or getting a connection). */
export function markStoreError(error: unknown): void {
  if (error && typeof error === 'object') fromTheStore.add(error);
}

/** Errors a store's client judged an outage itself (Redis: anything but Redis's own error reply). */
const judgedUnavailable = new WeakSet<object>();

/** Marks an error its store's client knows to be the store's absence, not a fault in the request. */
export function markStoreUnavailable(error: unknown): void {
  if (error && typeof error === 'object') judgedUnavailable.add(error);
}

/**
 * Whether an error says the database could not do the work just now, rather than that the work
 * itself is wrong: the same statement may well succeed in a moment. The engine retries writing a
 * finished turn's outcome on such an error (instead of recording a failure), and the API answers
 * 503 with Retry-After (instead of a 500 "fault of ours").
 */
export function isStoreUnavailable(error: unknown): boolean {
  if (!error || typeof error !== 'object') return false;
  if (judgedUnavailable.has(error)) return true;
  const e = error as { errcode?: unknown; code?: unknown; message?: unknown };
  // node:sqlite: the primary result code is the low byte of the extended one.
  if (typeof e.errcode === 'number') return SQLITE_UNAVAILABLE.has(e.errcode % 256);
  // PostgreSQL SQLSTATE: connection exceptions (class 08), insufficient resources (53: disk
  // full, out of memory, too many connections), a statement past its timeout (57014), the server
  // shutting down or starting (57P01–3).
  if (typeof e.code === 'string' && (/^(08|53)[0-9A-Z]{3}$/.test(e.code) || /^57(014|P0[123])$/.test(e.code))) return true;
  if (!fromTheStore.has(error)) return false;
  if (typeof e.code === 'string' && NODE_NETWORK_CODES.has(e.code)) return true;
  // node-postgres' own words (and BoundedWaitClient's) for a connection that went away or never came.
  return typeof e.message === 'string' && PG_CONNECTION_MESSAGES.test(e.message);
}

/**
 * What a log line says of a store that is away (the database, see isStoreUnavailable; or Redis):
 * its code and words, without a stack, which would say nothing more and, once per request, drown
 * the log.
 */
export function storeOutageFields(error: unknown): { cause: unknown; reason: unknown } {
  const e = (error ?? {}) as { code?: unknown; message?: unknown };
  return { cause: e.code, reason: e.message };
}

// SQLITE_BUSY, SQLITE_LOCKED, SQLITE_NOMEM, SQLITE_IOERR, SQLITE_FULL, SQLITE_CANTOPEN.
const SQLITE_UNAVAILABLE = new Set([5, 6, 7, 10, 13, 14]);

const NODE_NETWORK_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'EHOSTUNREACH', 'ENETUNREACH', 'EAI_AGAIN']);

// `timeout expired`: a new connection that the server did not accept within the connect timeout.
const PG_CONNECTION_MESSAGES = /^(Connection terminated|timeout exceeded when trying to connect|timeout expired|Client has encountered a connection error|Cannot use a pool after calling end|Query read timeout|PostgreSQL did not answer within)/;
