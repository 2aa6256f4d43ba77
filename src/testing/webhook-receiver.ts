import { once } from 'node:events';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Webhook } from 'standardwebhooks';

/** One POST a receiver got: its headers, its body, and whether `standardwebhooks` verified it. */
export interface Received {
  webhookId: string;
  timestamp: string;
  body: string;
  json: any;
  verified: boolean;
  at: number;
}

/**
 * A webhook receiver over real HTTP on loopback, as an integrator would write one: every POST
 * verified with the `standardwebhooks` package against the endpoint's secret (set once known).
 * `answer` says how to answer the n-th request (0-based): a status, optionally after a delay.
 */
export class WebhookReceiver {
  readonly received: Received[] = [];
  secret: string | null = null;
  answer: (n: number, request: Received) => { status: number; delayMs?: number } = () => ({ status: 200 });
  private readonly server: Server;
  private readonly waiters = new Set<() => void>();
  private readonly held = new Set<ServerResponse>();

  private constructor() {
    this.server = createServer((request, response) => void this.handle(request, response));
  }

  static async start(): Promise<WebhookReceiver> {
    const receiver = new WebhookReceiver();
    receiver.server.listen(0, '127.0.0.1');
    await once(receiver.server, 'listening');
    return receiver;
  }

  get url(): string {
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}/hooks`;
  }

  /** The webhook-ids received, in arrival order. */
  get ids(): string[] {
    return this.received.map((r) => r.webhookId);
  }

  /** Resolves once `done(received)` holds; fails after `timeoutMs`. */
  async until(done: (received: Received[]) => boolean, timeoutMs = 20_000): Promise<Received[]> {
    const deadline = Date.now() + timeoutMs;
    while (!done(this.received)) {
      if (Date.now() > deadline) throw new Error(`the receiver never got what was awaited; it got ${JSON.stringify(this.received.map((r) => [r.webhookId, r.json?.type]))}`);
      await new Promise<void>((resolve) => {
        const wake = () => { this.waiters.delete(wake); clearTimeout(timer); resolve(); };
        const timer = setTimeout(wake, 100);
        this.waiters.add(wake);
      });
    }
    return this.received;
  }

  async close(): Promise<void> {
    for (const response of this.held) response.destroy();
    this.server.closeAllConnections();
    this.server.close();
    await once(this.server, 'close').catch(() => {});
  }

  private async handle(request: IncomingMessage, response: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const chunk of request) chunks.push(chunk as Buffer);
    const body = Buffer.concat(chunks).toString('utf8');
    const header = (name: string) => String(request.headers[name] ?? '');
    let verified = false;
    try {
      if (this.secret) {
        new Webhook(this.secret).verify(body, {
          'webhook-id': header('webhook-id'), 'webhook-timestamp': header('webhook-timestamp'), 'webhook-signature': header('webhook-signature'),
        });
        verified = true;
      }
    } catch {
      verified = false;
    }
    let json: unknown = null;
    try {
      json = JSON.parse(body);
    } catch {
      // recorded as it came
    }
    const received: Received = { webhookId: header('webhook-id'), timestamp: header('webhook-timestamp'), body, json, verified, at: Date.now() };
    const n = this.received.length;
    this.received.push(received);
    for (const wake of [...this.waiters]) wake();
    const { status, delayMs = 0 } = this.answer(n, received);
    if (delayMs > 0) {
      this.held.add(response);
      await new Promise((resolve) => setTimeout(resolve, delayMs));
      this.held.delete(response);
    }
    if (!response.destroyed) response.writeHead(status, { 'content-type': 'text/plain' }).end('ok');
  }
}
