import { hash } from 'node:crypto';
import { EventEmitter } from 'node:events';
import type { Transaction } from 'kysely';
import pg from 'pg';
import { BoundedWaitClient, notifyAtCommit } from '../store/postgres-dialect.ts';
import type { DB } from '../store/schema.ts';

/**
 * What instances tell each other: a job was enqueued (wake a runner), finished (wake its
 * waiter) or cancelled (stop its run); a turn was written to a session, or events to people's
 * feeds (wake the requests held on them).
 */
export type BusEvent =
  | { type: 'job_enqueued'; agentId: string }
  | { type: 'job_done'; jobId: number }
  | { type: 'job_cancelled'; jobId: number }
  | { type: 'session_turn'; sessionId: string }
  | { type: 'feed'; userIds: string[]; deliveries?: true }; // deliveries: webhook deliveries were written with the events

/**
 * The Bus port. `stage` runs inside the transaction that makes the event true; `committed`
 * runs after it commits. In-process, only `committed` emits; on PostgreSQL, `stage` adds a
 * NOTIFY to the transaction's COMMIT, which the server delivers to every instance (this one
 * included).
 */
export interface Bus {
  stage(trx: Transaction<DB>, event: BusEvent): Promise<void>;
  committed(event: BusEvent): void;
  on(listener: (event: BusEvent) => void): () => void;
  close(): Promise<void>;
}

/** Delivery to this instance's listeners; both buses build on it. */
abstract class LocalDelivery {
  protected readonly emitter = new EventEmitter().setMaxListeners(0);

  /** Local listeners hear it now (on PostgreSQL the NOTIFY echo that follows is harmless: wake-ups are idempotent). */
  committed(event: BusEvent): void {
    this.emitter.emit('event', event);
  }

  on(listener: (event: BusEvent) => void): () => void {
    this.emitter.on('event', listener);
    return () => this.emitter.off('event', listener);
  }
}

export class InProcessBus extends LocalDelivery implements Bus {
  async stage(): Promise<void> {}

  async close(): Promise<void> {
    this.emitter.removeAllListeners();
  }
}

/**
 * The NOTIFY channel shared by the instances of one schema. PostgreSQL refuses a channel name of
 * 64 bytes or more in pg_notify (and LISTEN cuts it short), so a schema name too long to fit
 * (50 characters or more, of the 63 it may have) is stood in for by its digest.
 */
export function channelOf(schema: string | null): string {
  const plain = `agent_channel_${schema ?? 'public'}`;
  return plain.length <= 63 ? plain : `agent_channel_${hash('sha256', plain, 'hex').slice(0, 40)}`;
}

/** LISTEN/NOTIFY on one dedicated connection; reconnects and reports the gap so runners re-scan. */
export class PostgresBus extends LocalDelivery implements Bus {
  private readonly channel: string;
  private client: pg.Client | null = null;
  private closed = false;
  private readonly connectionString: string;
  private readonly onReconnect: () => void;

  private constructor(connectionString: string, schema: string | null, onReconnect: () => void) {
    super();
    this.connectionString = connectionString;
    this.channel = channelOf(schema);
    this.onReconnect = onReconnect;
  }

  static async connect(connectionString: string, schema: string | null, onReconnect: () => void = () => {}): Promise<PostgresBus> {
    const bus = new PostgresBus(connectionString, schema, onReconnect);
    await bus.listen();
    return bus;
  }

  private async listen(): Promise<void> {
    // Bounded as the store's connections are: a database that stopped answering fails the
    // (re)connection, which is tried again, instead of holding it for ever.
    const client = new BoundedWaitClient({ connectionString: this.connectionString });
    client.on('notification', (message) => {
      if (message.channel !== this.channel || !message.payload) return;
      try {
        this.emitter.emit('event', JSON.parse(message.payload) as BusEvent);
      } catch {
        // not ours
      }
    });
    client.on('error', () => this.reconnectSoon(client));
    client.on('end', () => this.reconnectSoon(client));
    await client.connect();
    await client.query(`LISTEN "${this.channel}"`);
    if (this.closed) {
      // Closed while this (re)connection was under way: it must not outlive the bus.
      await client.end().catch(() => {});
      return;
    }
    this.client = client;
  }

  private reconnectSoon(dead: pg.Client): void {
    if (this.closed || this.client !== dead) return;
    this.client = null;
    const retry = () => {
      if (this.closed) return;
      this.listen().then(() => { if (!this.closed) this.onReconnect(); }, () => setTimeout(retry, 1000).unref());
    };
    setTimeout(retry, 200).unref();
  }

  async stage(trx: Transaction<DB>, event: BusEvent): Promise<void> {
    await notifyAtCommit(trx, this.channel, JSON.stringify(event));
  }

  async close(): Promise<void> {
    this.closed = true;
    this.emitter.removeAllListeners();
    const client = this.client;
    this.client = null;
    await client?.end().catch(() => {});
  }
}
