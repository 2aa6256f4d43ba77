import { Worker } from 'node:worker_threads';

/**
 * Copies the SQLite write-ahead log back into the database file on a thread of its own.
 *
 * Left to SQLite, the connection that commits past `wal_autocheckpoint` pages copies them all
 * at once, with two fsyncs, on the event loop: every request in hand waits (10–60 ms under
 * load). This thread copies the pages soon after commits instead (PASSIVE: it never blocks a
 * writer), at most once per `intervalMs`, and sleeps while nothing is written. SQLite's own
 * automatic checkpoint stays on as the backstop that lets the log start over: when it runs,
 * little is left to copy, so it is short.
 */
export class SqliteCheckpointer {
  private readonly worker: Worker;
  private readonly commits = new Int32Array(new SharedArrayBuffer(4));

  constructor(path: string, onError: (error: unknown) => void = () => {}, intervalMs = 5) {
    this.worker = new Worker(CHECKPOINT_LOOP, { eval: true, workerData: { path, intervalMs, commits: this.commits.buffer } });
    this.worker.unref();
    // Without this thread the backstop still keeps the log bounded, only slower to serve.
    this.worker.once('error', onError);
  }

  /** Tells the thread that something was committed (cheap: no message, a shared counter). */
  committed(): void {
    Atomics.add(this.commits, 0, 1);
    Atomics.notify(this.commits, 0);
  }

  async stop(): Promise<void> {
    await this.worker.terminate();
  }
}

// Plain JavaScript run with eval, so the worker needs no loader for TypeScript.
const CHECKPOINT_LOOP = `
const { DatabaseSync } = require('node:sqlite');
const { workerData } = require('node:worker_threads');
const commits = new Int32Array(workerData.commits);
const pause = new Int32Array(new SharedArrayBuffer(4));
const db = new DatabaseSync(workerData.path);
db.exec('PRAGMA busy_timeout = 0');
const checkpoint = db.prepare('PRAGMA wal_checkpoint(PASSIVE)');
let seen = Atomics.load(commits, 0);
for (;;) {
  try { checkpoint.get(); } catch { /* busy: the next commit brings us back */ }
  Atomics.wait(pause, 0, 0, workerData.intervalMs); // at most one checkpoint per interval
  Atomics.wait(commits, 0, seen); // then sleep until something more is committed
  seen = Atomics.load(commits, 0);
}
`;
