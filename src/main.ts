import { createServer } from 'node:net';
import { buildApp, serverLog } from './app.ts';
import { loadConfig, settingsForLog, type Config } from './config.ts';
import { RELEASE } from './release.ts';
import { ANTHROPIC_BASE_URL, modelUnreachable } from './brains/model-probe.ts';
import { shownUrl } from './domain/shown-url.ts';
import { createRuntime } from './runtime.ts';
import { isStoreUnavailable, storeOutageFields } from './store/unavailable.ts';

/**
 * How long past SHUTDOWN_GRACE_MS an orderly shutdown may take before the process exits anyway,
 * with code 1. The engine gives turns still running at the end of the grace 5 s to stop; a
 * healthy shutdown ends well within the rest.
 */
const SHUTDOWN_DEADLINE_AFTER_GRACE_MS = 10_000;

/** `agent-channel serve`: start the server and stop it gracefully on SIGTERM, SIGINT or SIGHUP. */
export async function serve(): Promise<void> {
  const config = loadConfig();
  await checkCanListen(config);
  // The log comes first: what goes wrong while the runtime opens (Redis out of reach) is logged too.
  const log = serverLog(config);
  // The SQLite file is claimed before it is opened (forServer): a second server, or a restore under
  // way, stops this one before it creates, migrates or logs into the file.
  const runtime = await createRuntime({
    config,
    storeOptions: { forServer: true },
    logError: (error, context) => {
      // A database that is away heals by itself (the work is retried, or taken up again by its
      // lease): a warning, as the API's 503s are, rather than an error line that pages someone.
      if (isStoreUnavailable(error)) {
        log.warn({ ...storeOutageFields(error), during: context }, 'database unavailable');
      } else {
        log.error({ err: error }, context);
      }
    },
    logWarning: (fields, message) => log.warn(fields, message),
  });
  const server = await buildApp(runtime, { log });
  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    server.log.info({ signal }, 'shutting down');
    // The orderly path waits on the database (requests under way, the last writes, closing its
    // connections); one that froze would hold it for ever. Past the deadline the process exits anyway.
    setTimeout(() => {
      server.log.error({ signal, afterMs: config.shutdownGraceMs + SHUTDOWN_DEADLINE_AFTER_GRACE_MS },
        'shutdown did not finish by SHUTDOWN_GRACE_MS + 10 s (is the database answering?): exiting anyway');
      process.exit(1);
    }, config.shutdownGraceMs + SHUTDOWN_DEADLINE_AFTER_GRACE_MS).unref();
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
    await server.listen({ port: config.port, host: config.host, backlog: config.listenBacklog });
  } catch (error) {
    throw cannotListen(config, error);
  }
  await runtime.startEngine();
  log.info({ release: RELEASE, node: process.versions.node, ...settingsForLog(config) }, `agent-channel ${RELEASE} serving`);
  if (config.model) void warnIfModelUnreachable(config.model, log);
}

/**
 * A model configured but out of reach is said once at start, as a warning: the server serves all
 * the same (readiness is about the database; the model may come up later), and each turn that
 * meets it unreachable fails and is logged as such.
 */
async function warnIfModelUnreachable(model: NonNullable<Config['model']>, log: ReturnType<typeof serverLog>): Promise<void> {
  const failure = await modelUnreachable(model);
  if (!failure) return;
  log.warn({ provider: model.provider, model: model.name, baseUrl: shownUrl(model.baseUrl ?? ANTHROPIC_BASE_URL), failure },
    'the model cannot be reached: agents\' turns fail until it can (MODEL_BASE_URL)');
}

/**
 * Binds HOST and PORT for a moment before anything is opened: a HOST that does not resolve or is
 * not this machine's, or a PORT that is taken, stops the start before a SQLite database is made
 * and migrated for nothing. (The server listens for good only once the store is claimed; should
 * that fail after all, it says so the same way.)
 */
async function checkCanListen(config: Config): Promise<void> {
  const probe = createServer();
  try {
    await new Promise<void>((resolve, reject) => {
      probe.once('error', reject);
      probe.listen({ port: config.port, host: config.host }, resolve);
    });
  } catch (error) {
    throw cannotListen(config, error);
  } finally {
    await new Promise((resolve) => probe.close(resolve));
  }
}

// "getaddrinfo ENOTFOUND x" or "EADDRINUSE" alone does not say which setting to change.
const cannotListen = (config: Config, error: unknown): Error =>
  new Error(`cannot listen on HOST ${config.host}, PORT ${config.port}: ${(error as Error).message}`, { cause: error });
