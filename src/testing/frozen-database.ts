import { connect, createServer, type AddressInfo, type Server, type Socket } from 'node:net';

/**
 * What a database that froze (its process stopped, its machine paused) looks like to its clients:
 * it accepts TCP connections, and never says a word; and one that went away (restarting,
 * unreachable): every connection drops, new ones are refused. No server is stopped or
 * signalled: these are TCP servers of the test's own on 127.0.0.1.
 */

export interface TcpServer {
  port: number;
  close(): Promise<void>;
}

/** Keeps every connection it accepts open, and never answers. */
export async function startBlackHole(): Promise<TcpServer> {
  const sockets = new Set<Socket>();
  const server = createServer((socket) => {
    sockets.add(socket);
    socket.on('error', () => {}).on('close', () => sockets.delete(socket));
  });
  return listening(server, sockets);
}

export interface FreezableProxy extends TcpServer {
  /** From now on, what either side sends is held, not passed on (new connections too): the server looks frozen. */
  freeze(): void;
  /** Passes on what was held, in order, and everything after it: the server woke up. */
  thaw(): void;
  /** Drops every connection and refuses new ones: the server went away. */
  cut(): void;
  /** Lets connections through again: the server is back. */
  restore(): void;
}

/** A TCP proxy to `target` (host:port) that can be frozen and thawed, cut and restored. */
export async function startFreezableProxy(target: { host: string; port: number }): Promise<FreezableProxy> {
  let frozen = false;
  let away = false;
  const held: Array<{ to: Socket; chunk: Buffer }> = [];
  const sockets = new Set<Socket>();
  const forward = (from: Socket, to: Socket) => {
    from.on('data', (chunk: Buffer) => {
      if (frozen) held.push({ to, chunk });
      else to.write(chunk);
    });
    from.on('close', () => to.destroy());
    from.on('error', () => to.destroy());
  };
  const server = createServer((client) => {
    if (away) {
      client.destroy();
      return;
    }
    const upstream = connect(target.port, target.host);
    for (const socket of [client, upstream]) {
      sockets.add(socket);
      socket.on('close', () => sockets.delete(socket));
    }
    forward(client, upstream);
    forward(upstream, client);
  });
  const tcp = await listening(server, sockets);
  return {
    ...tcp,
    freeze() { frozen = true; },
    thaw() {
      frozen = false;
      for (const { to, chunk } of held.splice(0)) if (!to.destroyed) to.write(chunk);
    },
    cut() {
      away = true;
      for (const socket of sockets) socket.destroy();
    },
    restore() { away = false; },
  };
}

/** A FreezableProxy in front of the PostgreSQL server `databaseUrl` names, and that URL through the proxy. */
export async function proxyInFrontOf(databaseUrl: string): Promise<{ proxy: FreezableProxy; url: string }> {
  const target = new URL(databaseUrl);
  const proxy = await startFreezableProxy({ host: target.hostname, port: Number(target.port || 5432) });
  return { proxy, url: throughPort(databaseUrl, proxy.port) };
}

/** A PostgreSQL URL like `url`, but through 127.0.0.1:`port` (a proxy of the test's). */
function throughPort(url: string, port: number): string {
  const through = new URL(url);
  through.hostname = '127.0.0.1';
  through.port = String(port);
  return through.toString();
}

async function listening(server: Server, sockets: Set<Socket>): Promise<TcpServer> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as AddressInfo).port,
    async close() {
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}
