import { buildApp } from './app.ts';
import { loadConfig } from './config.ts';
import { createRuntime } from './runtime.ts';

/** `agent-channel serve`: start the server and stop it gracefully on SIGTERM, SIGINT or SIGHUP. */
export async function serve(): Promise<void> {
  const config = loadConfig();
  let app: Awaited<ReturnType<typeof buildApp>> | undefined;
  const runtime = await createRuntime(config, {}, (error, context) => app?.log.error({ err: error }, context));
  app = await buildApp(runtime);
  const server = app;
  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    server.log.info({ signal }, 'shutting down');
    // Stop accepting and let running turns finish within the grace period; the rest stay
    // queued in the database and resume at the next start.
    await Promise.all([server.close(), runtime.engine.stop(config.shutdownGraceMs)]);
    await runtime.close();
    process.exit(0);
  };
  // SIGHUP too: closing the terminal of a foreground `npm start` sends it, and its default (exit at
  // once) left waiting clients unanswered and running turns marked running.
  for (const signal of ['SIGTERM', 'SIGINT', 'SIGHUP'] as const) process.on(signal, () => void stop(signal));
  // Claim the SQLite file, then listen, then run turns: a second server started by mistake (on the
  // same file, or on a taken port) fails before it accepts a request or its engine would take up
  // (on SQLite: requeue) the work the running one is doing.
  runtime.store.claimForServer();
  try {
    await server.listen({ port: config.port, host: config.host });
  } catch (error) {
    // "getaddrinfo ENOTFOUND x" or "EADDRINUSE" alone does not say which setting to change.
    throw new Error(`cannot listen on HOST ${config.host}, PORT ${config.port}: ${(error as Error).message}`, { cause: error });
  }
  await runtime.startEngine();
}
