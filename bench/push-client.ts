/**
 * The client side of the push benchmark: JSON requests and Server-Sent Events streams over
 * keep-alive loopback connections, each answer stamped with the moment it arrived, on the clock
 * the server stamps turns with (so a turn's `ts` and its arrival can be subtracted).
 */
import { Agent, request as httpRequest, type IncomingMessage } from 'node:http';
import { parseTs } from '../src/domain/turn-clock.ts';

/** Now, in ms since the epoch with microseconds: the clock behind every turn `ts` (turn-clock.ts). */
export const nowMs = (): number => performance.timeOrigin + performance.now();

/** A turn `ts` in ms since the epoch, microseconds kept. */
export function tsMs(ts: string): number {
  const micros = parseTs(ts);
  if (micros === null) throw new Error(`not a turn ts: ${ts}`);
  return Number(micros) / 1000;
}

export interface Answer { status: number; body: any; receivedMs: number }

/** One feed event from a stream, and when its bytes arrived. */
export interface StreamedEvent { type: string; event: any; receivedMs: number }

/** An API client for one key; counts the requests it makes. */
export class ApiClient {
  requests = 0;
  private readonly agent = new Agent({ keepAlive: true, maxSockets: Infinity });
  private readonly origin: string;
  private readonly apiPrefix: string;
  private readonly token: string;

  constructor(origin: string, apiPrefix: string, token: string) {
    this.origin = origin;
    this.apiPrefix = apiPrefix;
    this.token = token;
  }

  /** A request with a JSON body (or none); the answer parsed, stamped when its last byte arrived. */
  json(method: 'GET' | 'POST', path: string, body?: unknown, headers: Record<string, string> = {}): Promise<Answer> {
    this.requests++;
    const payload = body === undefined ? undefined : JSON.stringify(body);
    return new Promise((resolve, reject) => {
      const request = httpRequest(this.origin + this.apiPrefix + path, {
        method, agent: this.agent,
        headers: { authorization: `Bearer ${this.token}`, ...(payload ? { 'content-type': 'application/json' } : {}), ...headers },
      }, (response) => {
        const chunks: Buffer[] = [];
        response.on('data', (chunk: Buffer) => chunks.push(chunk));
        response.on('end', () => {
          const receivedMs = nowMs();
          try {
            resolve({ status: response.statusCode!, body: JSON.parse(Buffer.concat(chunks).toString('utf8')), receivedMs });
          } catch (error) {
            reject(error);
          }
        });
        response.on('error', reject);
      });
      request.on('error', reject);
      request.end(payload);
    });
  }

  /**
   * Opens GET `path` as an event stream; `onEvent` gets each event as it arrives. Resolves once
   * the stream is open, with a function that closes it. `onError` hears of a stream that fails
   * or ends while open.
   */
  stream(path: string, onEvent: (streamed: StreamedEvent) => void, onError: (error: Error) => void): Promise<() => void> {
    this.requests++;
    return new Promise((resolve, reject) => {
      let closing = false;
      let opened = false;
      const request = httpRequest(this.origin + this.apiPrefix + path, {
        agent: this.agent, headers: { authorization: `Bearer ${this.token}`, accept: 'text/event-stream' },
      }, (response: IncomingMessage) => {
        if (response.statusCode !== 200) {
          reject(new Error(`GET ${path}: ${response.statusCode}`));
          response.resume();
          return;
        }
        let pending = '';
        response.setEncoding('utf8');
        response.on('data', (text: string) => {
          const receivedMs = nowMs();
          pending += text.replaceAll('\r\n', '\n');
          let end: number;
          while ((end = pending.indexOf('\n\n')) >= 0) {
            const block = pending.slice(0, end);
            pending = pending.slice(end + 2);
            const field = (name: string) => block.split('\n').find((line) => line.startsWith(`${name}:`))?.slice(name.length + 1).trim();
            const data = field('data');
            if (data !== undefined) onEvent({ type: field('event') ?? 'message', event: JSON.parse(data), receivedMs });
          }
        });
        response.on('end', () => { if (!closing) onError(new Error(`GET ${path}: the stream ended`)); });
        response.on('error', (error) => { if (!closing) onError(error); });
        opened = true;
        resolve(() => { closing = true; request.destroy(); });
      });
      request.on('error', (error) => {
        if (closing) return;
        if (opened) onError(error);
        else reject(error);
      });
      request.end();
    });
  }

  close(): void {
    this.agent.destroy();
  }
}
