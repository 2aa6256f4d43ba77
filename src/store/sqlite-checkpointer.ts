import { Worker } from 'node:worker_threads';

/**
 * Copies the SQLite write-ahead log back into the database file on a thread of its own.
 *
 * Left to SQLite, the connection that commits past `wal_autocheckpoint` pages copies them all
 * at once, with two fsyncs, on the event loop: every request in hand waits (10–60 ms under
 * load). This thread copies the pages soon after each commit instead (PASSIVE: it never blocks
 * a writer). The server's own automatic checkpoint stays on as the backstop that lets the log
 * start over: when it runs, almost nothing is left to copy, so it is short.
 */
export class SqliteCheckpointer {
  private readonly worker: Worker;

  constructor(path: string, intervalMs = 5) {
    this.worker = new Worker(CHECKPOINT_LOOP, { eval: true, workerData: { path, intervalMs } });
    this.worker.unref();
    this.worker.on('error', () => {}); // the backstop keeps the log bounded if this thread dies
  }

  async stop(): Promise<void> {
    await this.worker.terminate();
  }
}

// Plain JavaScript run with eval, so the worker needs no loader for TypeScript.
const CHECKPOINT_LOOP = `
const { DatabaseSync } = require('node:sqlite');
const { workerData } = require('node:worker_threads');
const db = new DatabaseSync(workerData.path);
db.exec('PRAGMA busy_timeout = 0');
const checkpoint = db.prepare('PRAGMA wal_checkpoint(PASSIVE)');
setInterval(() => {
  try { checkpoint.get(); } catch { /* busy or closing: the next tick tries again */ }
}, workerData.intervalMs);
`;
