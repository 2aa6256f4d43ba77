import { createServer, request as httpRequest, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * A reverse proxy in front of a real server, on a port of its own: what the network between a
 * client and the server can do to a request, done on purpose. It forwards every request to
 * `target` (which a test may change, to a restarted server), except where a fault is queued for
 * the next matching request:
 * - `drop-after-forward`: the request reaches the server, whose answer is then lost (the client's
 *   connection is cut instead);
 * - a canned answer (`{ status, headers, body }`), as a server or gateway in between might give.
 * While the target does not answer, the client's connection is cut.
 */
export type Fault = 'drop-after-forward' | { status: number; headers?: Record<string, string>; body?: string };

export interface FaultyProxy {
  url: string;
  target: string;
  /** The next request whose method and path (without the query) match is given this fault. */
  failNext(method: string, pathPattern: RegExp, fault: Fault): void;
  /** Every request seen, `METHOD /path?query`, in order. */
  readonly seen: string[];
  /** Cuts every open connection (open event streams included). */
  dropAll(): void;
  close(): Promise<void>;
}

export async function startFaultyProxy(target: string): Promise<FaultyProxy> {
  const faults: { method: string; path: RegExp; fault: Fault }[] = [];
  const seen: string[] = [];
  const open = new Set<ServerResponse>();
  const proxy: FaultyProxy = {
    url: '',
    target,
    failNext(method, path, fault) { faults.push({ method, path, fault }); },
    seen,
    dropAll() { for (const res of open) res.socket?.destroy(); },
    close: () => new Promise((resolve) => { proxy.dropAll(); server.close(() => resolve()); server.closeAllConnections(); }),
  };
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    seen.push(`${req.method} ${req.url}`);
    open.add(res);
    res.on('close', () => open.delete(res));
    const path = new URL(req.url!, 'http://x').pathname;
    const index = faults.findIndex((f) => f.method === req.method && f.path.test(path));
    const fault = index === -1 ? null : faults.splice(index, 1)[0]!.fault;
    if (fault !== null && fault !== 'drop-after-forward') {
      req.resume();
      res.writeHead(fault.status, fault.headers ?? {}).end(fault.body ?? '');
      return;
    }
    const upstream = httpRequest(new URL(req.url!, proxy.target), { method: req.method, headers: req.headers }, (answer) => {
      if (fault === 'drop-after-forward') {
        answer.resume();
        answer.on('end', () => res.socket?.destroy());
        return;
      }
      res.writeHead(answer.statusCode!, answer.headers);
      answer.pipe(res);
      answer.on('error', () => res.socket?.destroy());
      answer.on('close', () => { if (!answer.complete) res.socket?.destroy(); }); // the server went away mid-answer
      res.on('close', () => answer.destroy());
    });
    upstream.on('error', () => res.socket?.destroy());
    req.pipe(upstream);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  proxy.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return proxy;
}
